"""Screenshot of `wmforge view` for the README: python scripts/viewer_screenshot.py RENDER_DIR OUT.png"""

import shutil
import sys
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from stages.viewer.server import make_server  # noqa: E402

render_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
server = make_server(render_dir)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_address[1]}/"
with sync_playwright() as pw:
    b = pw.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                           args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
    page = b.new_page(viewport={"width": 1400, "height": 860})
    page.goto(url)
    page.wait_for_function("window.wmforgeViewer && window.wmforgeViewer.ready")
    frame = int(sys.argv[3]) if len(sys.argv) > 3 else 75
    page.locator("#scrubber").fill(str(frame))
    page.wait_for_function("f => window.wmforgeViewer.allVideos().every(v => "
                           "window.wmforgeViewer.frameOf(v) === f)", arg=frame)
    page.screenshot(path=str(out))
    b.close()
server.shutdown()
print(out)
