[the Pi extension from assets/ (embedded server)]
