#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks a `cubert tune|bench --report` page as a browser renders it (headless Chromium).
#
#   scripts/check-report.sh PAGE.html [DOC.json] [KEY...] [--screenshot OUT.png] [--size WxH]
#
# From the rendered DOM it checks that the page has a `section.key`, that every one holds a
# `g.candidate` of its own key, that each KEY given has a section, and that the roofline SVG is
# there. With the JSON document the page was made from, also that every key and every candidate
# in it is drawn (data-key, data-candidate) and that the roofline has one `g.ceiling` per ceiling
# the document measured. --screenshot also saves a PNG of the page (1200x2400 unless --size) for a
# person to look at. Exits 0 when all hold, 1 naming what is missing, 2 on a usage or browser
# error. Needs chromium (Debian package `chromium`) and python3.
set -uo pipefail

usage() {
  sed -n '3,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

page="" doc="" shot="" size="1200,2400"
keys=()
while [ $# -gt 0 ]; do
  case "$1" in
    --screenshot) [ $# -ge 2 ] || usage; shot=$2; shift 2 ;;
    --size) [ $# -ge 2 ] || usage; size=${2/x/,}; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "check-report: unknown option $1" >&2; usage ;;
    *)
      if [ -z "$page" ]; then
        page=$1
      elif [ -z "$doc" ] && [ "${#keys[@]}" -eq 0 ] && [[ "$1" == *.json ]] && [ -f "$1" ]; then
        doc=$1
      else
        keys+=("$1")
      fi
      shift ;;
  esac
done
[ -n "$page" ] || usage
[ -f "$page" ] || { echo "check-report: no such page: $page" >&2; exit 2; }
command -v chromium >/dev/null || { echo "check-report: chromium is not installed" >&2; exit 2; }
command -v python3 >/dev/null || { echo "check-report: python3 is not installed" >&2; exit 2; }

url="file://$(realpath "$page")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Chromium complains on stderr about what a container lacks (D-Bus, a GPU, a sandbox) and its
# Debian wrapper about its own shell tests; none of that bears on the page. What is left is shown
# only when the browser itself fails.
browser() {
  timeout 60 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$work/profile" "$@" 2>"$work/stderr"
  local rc=$?
  if [ $rc -ne 0 ]; then
    [ $rc -eq 124 ] && echo "check-report: chromium took over 60 s" >&2
    grep -vE 'dbus|DBus|gpu|GPU|viz|sandbox|unexpected operator|Fontconfig|dri|egl|vaapi' \
      "$work/stderr" | tail -n 20 >&2
  fi
  return $rc
}

if [ -n "$shot" ]; then
  mkdir -p "$(dirname "$shot")"
  browser --screenshot="$(realpath -m "$shot")" --window-size="$size" "$url" >/dev/null ||
    { echo "check-report: chromium could not take the screenshot" >&2; exit 2; }
  [ -s "$shot" ] || { echo "check-report: chromium wrote no screenshot to $shot" >&2; exit 2; }
  echo "check-report: screenshot $shot"
fi

browser --dump-dom "$url" >"$work/dom.html" ||
  { echo "check-report: chromium could not render $page" >&2; exit 2; }
[ -s "$work/dom.html" ] || { echo "check-report: chromium rendered nothing for $page" >&2; exit 2; }

python3 - "$work/dom.html" "$doc" "${keys[@]}" <<'PY'
import json
import math
import sys
from html.parser import HTMLParser

dom_path, doc_path, wanted_keys = sys.argv[1], sys.argv[2], sys.argv[3:]


class Page(HTMLParser):
    """Collects the report's marked elements and which key section each candidate sits in."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.sections = []      # data-key of each section.key, in order
        self.candidates = []    # (section key or None, data-key, data-candidate, data-status)
        self.ceilings = []      # data-name of each g.ceiling inside svg.roofline
        self.points = []        # (data-key, data-kind) of each g.roof-point
        self.rooflines = 0
        self._section_stack = []  # data-key for a key section, None for any other section
        self._svg_stack = []      # whether each open svg is the roofline

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "section":
            is_key = "key" in classes
            self._section_stack.append(a.get("data-key", "") if is_key else None)
            if is_key:
                self.sections.append(a.get("data-key", ""))
        elif tag == "svg":
            roof = "roofline" in classes
            self._svg_stack.append(roof)
            self.rooflines += roof
        elif tag == "g" and "candidate" in classes:
            here = next((k for k in reversed(self._section_stack) if k is not None), None)
            self.candidates.append((here, a.get("data-key"), a.get("data-candidate"),
                                    a.get("data-status")))
        elif tag == "g" and "ceiling" in classes and any(self._svg_stack):
            self.ceilings.append(a.get("data-name"))
        elif tag == "g" and "roof-point" in classes:
            self.points.append((a.get("data-key"), a.get("data-kind")))

    def handle_endtag(self, tag):
        if tag == "section" and self._section_stack:
            self._section_stack.pop()
        elif tag == "svg" and self._svg_stack:
            self._svg_stack.pop()


page = Page()
with open(dom_path, encoding="utf-8") as f:
    page.feed(f.read())

missing = []
if not page.sections:
    missing.append("no section.key on the page")
for key in page.sections:
    if not any(c[0] == key for c in page.candidates):
        missing.append(f"section.key {key!r} has no g.candidate")
for here, key, name, status in page.candidates:
    if here is not None and key != here:
        missing.append(f"g.candidate {name!r} has data-key {key!r} inside section {here!r}")
    if status not in ("ok", "eliminated", "failed", "quarantined", "skipped"):
        missing.append(f"g.candidate {name!r} of {key!r} has data-status {status!r}")
for key in wanted_keys:
    if key not in page.sections:
        missing.append(f"no section.key for {key!r}")
if page.sections and page.rooflines != 1:
    missing.append(f"{page.rooflines} svg.roofline on the page, not one")


def number(v):
    """A positive finite number, or None: the renderer draws nothing for the rest."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v if math.isfinite(v) and v > 0 else None


if doc_path:
    with open(doc_path, encoding="utf-8") as f:
        doc = json.load(f)
    drawn = {(c[1], c[2]) for c in page.candidates}
    keys = doc.get("keys") or []
    if len(keys) != len(page.sections):
        missing.append(f"the document has {len(keys)} keys, the page {len(page.sections)} sections")
    for k in keys:
        # The renderer's fallbacks for a key without `key` and a candidate without `name`.
        key = k.get("key") or "|".join(str(k.get(f) or "") for f in ("op", "shape", "dtype"))
        if key not in page.sections:
            missing.append(f"no section.key for key {key!r}")
        for i, c in enumerate(k.get("candidates") or []):
            index = c.get("index") if isinstance(c.get("index"), int) else i
            name = c.get("name") or f"#{index}"
            if (key, name) not in drawn:
                missing.append(f"candidate {name!r} of {key!r} is not drawn")
    ceil = (doc.get("device") or {}).get("ceilings") or {}
    expected = []
    if number(ceil.get("bandwidth_gbs")):
        expected.append("bandwidth_gbs")
    flops = ceil.get("flops") if isinstance(ceil.get("flops"), dict) else {}
    expected += [f"flops.{d}" for d, v in flops.items() if number(v)]
    if keys:
        for name in expected:
            if name not in page.ceilings:
                missing.append(f"no g.ceiling {name!r} in the roofline")
        for name in page.ceilings:
            if name not in expected:
                missing.append(f"g.ceiling {name!r} is not a ceiling of the document")

if missing:
    for m in missing:
        print(f"check-report: MISSING: {m}", file=sys.stderr)
    print(f"check-report: FAIL ({len(missing)} problem{'s' if len(missing) != 1 else ''})",
          file=sys.stderr)
    sys.exit(1)
print(f"check-report: ok: {len(page.sections)} keys, {len(page.candidates)} candidates, "
      f"{len(page.ceilings)} ceilings, {len(page.points)} roofline points")
PY
