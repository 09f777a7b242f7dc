"""``tools.bench.scrape_cost`` keeps working: a tiny run against our broker scrapes it from a
process of its own, gzipped, and reads the broker's CPU per scrape.

Figures are not judged (speed is measured by the tool, never asserted in tests): what is checked
is that both runs of each round happened, the scraper's report came back from its process, the
page arrived gzipped and whole, and the probe read the broker's CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_tiny_scrape_cost_run_reports_the_scrapes(tmp_path: Path) -> None:
    out = tmp_path / "scrape-cost.json"
    result = subprocess.run(
        [sys.executable, "-m", "tools.bench.scrape_cost", "--rounds", "1", "--messages", "20000", "--partitions", "1",
         "--json", str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(out.read_text())
    (plain, scraped), = document["runs"]["1"]
    assert not plain["scraped"] and plain["scrapes"] == 0 and plain["msgs_per_s"] > 0
    assert scraped["scraped"] and scraped["scrapes"] >= 1 and scraped["msgs_per_s"] > 0
    assert scraped["scrape_lines"] > 100 and 0 < scraped["scrape_sent_bytes"] < scraped["scrape_bytes"] / 2  # gzipped
    assert scraped["scraper_cpu_s"] > 0 and scraped["probe_cpu_ms_per_scrape"] >= 0
    assert document["summary"]["1"]["ratios"] and "scraped/plain median" in result.stdout
