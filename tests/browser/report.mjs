// Loads an evidence bundle's report.html in headless Chromium (Debian's, through
// playwright-core) and prints one JSON object: every request the page made (seen
// through the DevTools protocol's Network domain, which also sees file:// and
// data: loads), the timeline rows (seq and proof status), the page's text; it
// saves a screenshot and prints the page to PDF.
// Usage: node report.mjs PLAYWRIGHT_DIR CHROMIUM REPORT.html SHOT.png OUT.pdf
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const [playwrightDir, chromium, report, shot, pdf] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const { chromium: launcher } = require(playwrightDir);

const browser = await launcher.launch({
  executablePath: chromium,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
const cdp = await page.context().newCDPSession(page);
const requests = [];
cdp.on('Network.requestWillBeSent', (e) => requests.push(e.request.url));
await cdp.send('Network.enable');
const url = pathToFileURL(report).href;
await page.goto(url, { waitUntil: 'load' });
await page.waitForTimeout(300);
const rows = await page.$$eval('#timeline tbody tr', (trs) => trs.map((tr) => ({
  seq: Number(tr.querySelector('td').textContent.trim()),
  proof: tr.querySelector('td:last-child').textContent.trim(),
  classes: tr.className,
})));
const text = await page.evaluate(() => document.body.innerText);
const scripts = await page.$$eval('script', (s) => s.length);
await page.screenshot({ path: shot, fullPage: true });
await page.pdf({ path: pdf, format: 'A4', printBackground: true });
await browser.close();
console.log(JSON.stringify({ url, requests, rows, text, scripts }));
