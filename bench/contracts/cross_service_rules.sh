#!/bin/bash
# Counts the definitions of rules that cross services made outside contracts/ (where they belong), in the tree $1
# (default: this checkout): route grammars, readers of scienceslack.json, metrics parsers, VERIFIER_VERSION,
# system:scheduler, ROLE_NAMES, and permission decisions. Each pattern matches the way the code before issue 12 spelt
# one such definition, one line per definition; results.md has the counts before and after.
#   bench/contracts/cross_service_rules.sh /tmp/main-tree     # e.g. after: git archive 32ad781 | tar -x -C /tmp/main-tree
cd "${1:-$(dirname "$0")/../..}" || exit 2
src="services checks deploy/local"
total=0
count() {
    local label="$1" n
    shift
    n=$(grep -rnE "$@" $src --include=*.py --include=*.sbatch --include=*.sh 2>/dev/null | wc -l)
    printf '%-58s %s\n' "$label" "$n"
    total=$((total + n))
}
count "route-name grammars (regex over route names)" 'ROUTE(_NAME)? = re\.compile|re\.fullmatch\(r"routes/'
count "scienceslack.json readers (json parse of the rules)" \
    'json\.loads?\((rules|rules_json|text_or_dict|open\(sys\.argv\[1\]\))|json\.loads\(Path\(path\)\.read_text|json\.loads\(text\) if text else|rules\["limits"\]\["partitions"\]'
count "metrics-file parsers (json parse of a metrics file)" 'document = json\.loads\(data\)|data = json\.loads\(text\)'
count "VERIFIER_VERSION definitions" '^VERIFIER_VERSION = '
count "system:scheduler definitions" '^[A-Z_]+ = "system:scheduler"'
count "ROLE_NAMES definitions" '^ROLE_NAMES = '
count "permission decisions outside contracts.access" \
    '\.role < |role < events_pb2|require_role\(context|def check_write\(actor: Actor, target: RefTarget, route_owner: str \| None\) -> None|def check_route_writer|def check_token_grant|def check_token_revoke|if not actor\.is_maintainer'
printf '%-58s %s\n' "total" "$total"
