//go:build !linux

package widget

// poller is Linux's (poller_linux.go); elsewhere each socket keeps a reading goroutine.
type poller struct{}

func thePoller() *poller { return nil }

func (*poller) add(*session) bool { return false }

func (*poller) remove(*session) {}
