//go:build race

package reader

const checkInvariants = true
