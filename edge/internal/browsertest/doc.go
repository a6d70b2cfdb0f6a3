// Package browsertest holds the browser tests of the widget, the chat window and the operator
// inbox: real edges, Debian's chromium driven by chromedp. See browser_test.go.
package browsertest
