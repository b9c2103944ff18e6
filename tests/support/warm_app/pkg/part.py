PART = "relative"
