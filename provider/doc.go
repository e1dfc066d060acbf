// Package provider is the usb4verbs verbs engine usable from Go.
package provider
