#!/usr/bin/env bash
# `make demo`: build the provider, run it through dev_overrides (no registry,
# no `terraform init`), apply examples/quickstart (a small fleet on the
# daemonless local backend), print the outputs, destroy. Whatever happens, the
# fleet is destroyed and the temporary directory removed.
#
# Environment: DEMO_EXAMPLE (default examples/quickstart), DEMO_KEEP=1 to skip
# the destroy (the working directory is then kept and printed).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
EXAMPLE=${DEMO_EXAMPLE:-examples/quickstart}
BIN_DIR=${BIN_DIR:-$REPO/bin}
export CGO_ENABLED=0 CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
unset TF_ACC_TERRAFORM_VERSION

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }
now_ms() { date +%s%3N; }

command -v terraform >/dev/null || die "terraform is not on PATH"

# The local backend isolates sandboxes with bubblewrap.
if ! command -v bwrap >/dev/null; then
	say "installing bubblewrap"
	[ "$(id -u)" = 0 ] || die "bubblewrap is missing: run as root or apt-get install bubblewrap"
	"$REPO/scripts/setup-engines.sh" local
fi

say "building the provider"
make -C "$REPO" --no-print-directory build BIN_DIR="$BIN_DIR"

work=$(mktemp -d /tmp/sandbox-demo.XXXXXX)
case "$EXAMPLE" in /*) src=$EXAMPLE ;; *) src=$REPO/$EXAMPLE ;; esac
[ -d "$src" ] || die "no example directory $src"
cp -R "$src/." "$work/"
cat >"$work/terraformrc" <<EOF
provider_installation {
  dev_overrides {
    "sandboxfleet/sandbox" = "$BIN_DIR"
  }
  direct {}
}
EOF
export TF_CLI_CONFIG_FILE=$work/terraformrc

applied=0
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ "$applied" = 1 ] && [ "${DEMO_KEEP:-}" != 1 ]; then
		say "cleaning up after a failure: terraform destroy"
		terraform -chdir="$work" destroy -auto-approve -input=false -no-color >"$work/destroy.log" 2>&1 ||
			{ tail -n 20 "$work/destroy.log" >&2; echo "demo: destroy failed; state kept in $work" >&2; exit "$rc"; }
	fi
	if [ "${DEMO_KEEP:-}" = 1 ]; then
		echo "demo: kept $work (TF_CLI_CONFIG_FILE=$work/terraformrc terraform -chdir=$work destroy)"
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "terraform apply ($EXAMPLE, provider from $BIN_DIR)"
applied=1
start=$(now_ms)
terraform -chdir="$work" apply -auto-approve -input=false -compact-warnings
apply_ms=$(($(now_ms) - start))

say "outputs"
terraform -chdir="$work" output

say "re-plan (should be empty)"
start=$(now_ms)
replan=0
terraform -chdir="$work" plan -input=false -detailed-exitcode -no-color >"$work/replan.log" 2>&1 || replan=$?
replan_ms=$(($(now_ms) - start))
case "$replan" in
0) echo "no changes" ;;
2) grep -E '^\s+[~+-]|Plan:' "$work/replan.log" || true; echo "demo: the re-plan is not empty" >&2 ;;
*) cat "$work/replan.log" >&2; exit "$replan" ;;
esac

if [ "${DEMO_KEEP:-}" = 1 ]; then
	exit 0
fi
say "terraform destroy"
start=$(now_ms)
# The destroy plan repeats every attribute: show what happens, not the plan.
set +e
terraform -chdir="$work" destroy -auto-approve -input=false -compact-warnings -no-color 2>&1 |
	grep -E -A20 'Destroying|Destruction complete|Destroy complete|Error|still destroying'
rc=${PIPESTATUS[0]}
set -e
[ "$rc" = 0 ] || die "terraform destroy failed (exit $rc)"
applied=0
destroy_ms=$(($(now_ms) - start))

say "done: apply ${apply_ms} ms, re-plan ${replan_ms} ms, destroy ${destroy_ms} ms"
[ "$replan" = 0 ] || exit 1
