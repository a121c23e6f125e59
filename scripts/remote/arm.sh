#!/usr/bin/env bash
# Trains one arm of issue 84's screen to its schedule's end on one lent GPU machine, in chunks of at most MINUTES
# (rule AC), each a campaign.sh call that resumes from the chunk before it. Run it detached (detach.sh), so that
# the calls that follow keep the machine warm and do other work while it trains; the footage must be staged first.
#
#   bash scripts/remote/arm.sh WORK MINUTES [the first chunk's train.py options]
#
# WORK/chunkK holds chunk K's state parts and log lines (campaign.sh's output); the last chunk's folder is the arm's
# state. The first chunk starts fresh, or from --init-weights where its options name them; the later ones resume.
set -euo pipefail
work=${1:?the work folder}
minutes=${2:?minutes per chunk}
shift 2
here=$(dirname "${BASH_SOURCE[0]}")
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
mkdir -p "$work"
bash "$here/campaign.sh" "$work/chunk1" "$minutes" "$@"
k=1
until python3 -c "
import json, sys
state = '/tmp/campaign'
step = json.load(open(f'{state}/progress.json'))['step']
config = json.load(open(f'{state}/train_config.json'))
sys.exit(0 if step >= config['schedule_start'] + config['total_steps'] else 1)"; do
    k=$((k + 1))
    RESUME="$work/chunk$((k - 1))" bash "$here/campaign.sh" "$work/chunk$k" "$minutes"
done
echo "arm done after $k chunks: $work/chunk$k"
