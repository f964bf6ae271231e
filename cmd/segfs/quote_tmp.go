package main

import "strconv"

func quoteName(s string) string {
	if strconv.CanBackquote(s) && !containsSpace(s) {
		return s
	}
	return strconv.Quote(s)
}

func containsSpace(s string) bool {
	for _, r := range s {
		if r == ' ' {
			return true
		}
	}
	return false
}
