// memloop opencode plugin v3
