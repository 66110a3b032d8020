[the OpenCode gate plugin from assets/]
