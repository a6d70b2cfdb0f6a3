# Filters `go test -v` output for CI: package results, failures with the log lines their test
# printed, and every skipped test with its reason, listed again at the end under a banner so
# no skip goes unseen. (go test -v prints a test's log lines before its --- line.)
dump { print; next }
/^panic:/ || /^fatal error:/ { dump = 1; printf "%s", buf; print; next }
/^=== RUN/ { buf = ""; next }
/^=== (PAUSE|CONT|NAME)/ { next }
/^ *--- PASS/ { buf = ""; next }
/^ *--- FAIL/ { print; printf "%s", buf; buf = ""; next }
/^ *--- SKIP/ { skip = skip $0 "\n" buf; buf = ""; next }
/^(ok|FAIL|\?) / || /^FAIL$/ { print; buf = ""; next }
/^PASS$/ { next }
{ buf = buf $0 "\n" }
END {
	if (skip != "") {
		print "\n################ SKIPPED TESTS ################"
		printf "%s", skip
		print "###############################################"
	} else {
		print "\nno test was skipped"
	}
	print "(full output: bin/test.log)"
}
