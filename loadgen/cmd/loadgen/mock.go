package main

import "spookat/loadgen/mock"

func init() {
	mockRun = mock.Run
	mockUsage = "  mock     serve the Slack, Discord and webhook mocks (loadgen mock -h)\n"
}
