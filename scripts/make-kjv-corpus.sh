#!/usr/bin/env bash
# Rebuilds data/kjv/ (the language-model job's corpus) from Debian's bible-kjv package:
# the King James Version, public domain. Not part of any build or test: the output is
# committed. Needs Debian/Ubuntu with the package (`apt-get install bible-kjv`, which pulls
# bible-kjv-text 4.38). The split is by chapter: chapter index % 20 == 18 -> valid,
# == 19 -> test, the rest -> train; one verse per line, verse numbers and chapter headings
# removed, so every line is running text.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v bible >/dev/null || { echo "install Debian's bible-kjv first" >&2; exit 1; }
out=data/kjv
mkdir -p "$out"
echo "reading Gen 1:1 - Rev 22:21 from bible-kjv and splitting it by chapter ..."
# On a terminal a bar over the 1,189 chapters (redrawn in place on stderr); plain lines otherwise.
bar=0
[ -t 2 ] && bar=1
bible -l0 -m 16384 "Gen1:1-Rev22:21" | awk -v out="$out" -v bar="$bar" '
    /^$/ { next }
    /^[^ ]/ {                                         # "Genesis 1": a chapter heading
        chapter++
        if (bar) {
            done = int(40 * chapter / 1189)
            line = sprintf("%" done "s", ""); gsub(/ /, "#", line)
            printf "\r  [%-40s] chapter %d/1189", line, chapter > "/dev/stderr"
        }
        next
    }
    {
        sub(/^ *[0-9]+ /, "")                         # the verse number
        f = (chapter % 20 == 18) ? "valid" : (chapter % 20 == 19) ? "test" : "train"
        print > (out "/" f ".txt")
    }
    END { if (bar) printf "\n" > "/dev/stderr" }'
for f in train valid test; do
    echo "  $out/$f.txt: $(wc -l < "$out/$f.txt") verses, compressing"
    gzip -9 -n -f "$out/$f.txt"
done
(cd "$out" && sha256sum train.txt.gz valid.txt.gz test.txt.gz > SHA256SUMS)
echo "wrote $out/{train,valid,test}.txt.gz and $out/SHA256SUMS"
