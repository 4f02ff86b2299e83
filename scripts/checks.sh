# The helpers scripts/test.sh (CI) and scripts/check.sh (make check) share: sourced, not run.
# step prints a step's name and the seconds since start; check runs a command as a named
# check and records its failure in failed, so one run reports every problem; gofmt_check and
# file_length_check are the two checks both scripts make.

# No hand-written Go file may be longer: a longer one holds more than one job.
MAX_GO_LINES=600

start=$(date +%s)
step() { printf '\n==> %s (%ds)\n' "$*" "$(($(date +%s) - start))"; }
failed=()
check() { # check NAME COMMAND...
	local name=$1
	shift
	step "$name"
	if ! "$@"; then
		failed+=("$name")
		echo "FAILED: $name" >&2
	fi
}

gofmt_check() {
	local unformatted
	unformatted=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
	if [ -n "$unformatted" ]; then
		echo "not gofmt-formatted:" >&2
		echo "$unformatted" >&2
		return 1
	fi
}

# Generated files (protoc output) are exempt.
file_length_check() {
	local long
	long=$(git ls-files '*.go' | xargs grep -L '^// Code generated .* DO NOT EDIT\.$' |
		xargs wc -l | awk -v max="$MAX_GO_LINES" '$2 != "total" && $1 > max { print $2 ": " $1 " lines" }')
	if [ -n "$long" ]; then
		echo "Go files over $MAX_GO_LINES lines (split them by job):" >&2
		echo "$long" >&2
		return 1
	fi
}
