// Package gosrc type-checks the uapi package from its source files so that
// generators and tests can enumerate its constants (with exact values) and
// struct types without a hand-maintained list.
package gosrc
