// memloop kilo plugin v3
