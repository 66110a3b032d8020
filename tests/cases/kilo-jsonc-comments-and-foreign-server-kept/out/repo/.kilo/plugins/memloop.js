[the Kilo gate plugin: the OpenCode plugin as --agent kilo]
