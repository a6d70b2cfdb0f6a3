# Filters `go test -v` output for CI and for a person watching `make test`: each top-level
# test as it finishes (PASS with its time, so minutes of silence never happen), package
# results, failures with the log lines their test printed, and every skipped test with its
# reason, listed again at the end under a banner so no skip goes unseen. (go test -v prints a
# test's log lines before its --- line.)
dump { print; next }
/^panic:/ || /^fatal error:/ { dump = 1; printf "%s", buf; print; next }
/^=== RUN/ { buf = ""; next }
/^=== (PAUSE|CONT|NAME)/ { next }
/^--- PASS/ { passed++; print; fflush(); buf = ""; next }
/^ +--- PASS/ { buf = ""; next }
/^ *--- FAIL/ { if ($0 ~ /^---/) failed++; print; printf "%s", buf; fflush(); buf = ""; next }
/^ *--- SKIP/ { if ($0 ~ /^---/) skipped++; print; fflush(); skip = skip $0 "\n" buf; buf = ""; next }
/^(ok|FAIL|\?) / || /^FAIL$/ { print; fflush(); buf = ""; next }
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
	printf "top-level tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped
	print "(full output: bin/test.log)"
}
