// The browser test of `guideloom serve` (run by `cargo xtask browser`, see xtask/src/browser.rs).
//
// Builds a real root with the CLI (snapshot `draft`: CBOR records, expired by `gc`;
// `preview`: CBOR records, tagged `prod` before the collection so the tag keeps it; `images`:
// raw PNG records generated here; `captions`: CBOR records, one of them hostile, with a
// dataset card whose README is hostile too; annotation sets `label/v1` on images, `score/v1`
// and `score/v2` on captions; then `guideloom gc --grace 0s --keep-last 1`), starts
// `guideloom serve --port 0`, and drives headless Chromium (the system's, through
// playwright-core: no browser download) through the overview (card, tag and expired
// snapshot marked), the card page, paging, an image record (the <img> must decode),
// switching snapshot (a tag too; the expired one not selectable) and annotation set (values
// checked against the data written), an expired snapshot's records page, the page filter,
// a jump to an index and the bench page. Every view must report no CSP violation and no
// console error; a screenshot of each is saved as $GUIDELOOM_BROWSER_OUT/<view>.png.
//
// Environment: GUIDELOOM_BIN (the guideloom binary), GUIDELOOM_CHROMIUM (the browser),
// GUIDELOOM_BROWSER_OUT (screenshot directory).
"use strict";

const { chromium } = require("playwright-core");
const { spawn, execFileSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const readline = require("node:readline");
const zlib = require("node:zlib");

const BIN = process.env.GUIDELOOM_BIN;
const CHROMIUM = process.env.GUIDELOOM_CHROMIUM || "/usr/bin/chromium";
const OUT = process.env.GUIDELOOM_BROWSER_OUT || "target/browser";

function fail(message) {
  throw new Error(message);
}

function check(condition, message) {
  if (!condition) fail(message);
}

// ---- PNGs (RGB, 8 bits) ----
function crc32(bytes) {
  let crc = 0xffffffff;
  for (const b of bytes) {
    crc ^= b;
    for (let k = 0; k < 8; k++) crc = (crc >>> 1) ^ (0xedb88320 & -(crc & 1));
  }
  return (crc ^ 0xffffffff) >>> 0;
}

function chunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}

function png(width, height, pixel) {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // RGB
  const raw = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    const row = y * (width * 3 + 1);
    for (let x = 0; x < width; x++) {
      const [r, g, b] = pixel(x, y);
      raw[row + 1 + x * 3] = r;
      raw[row + 2 + x * 3] = g;
      raw[row + 3 + x * 3] = b;
    }
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", zlib.deflateSync(raw)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

// ---- the root ----
function guideloom(...args) {
  return execFileSync(BIN, args, { encoding: "utf8" });
}

const IMAGES = 12;
const CAPTIONS = 30;
const COLORS = ["red", "green", "blue"];
const HOSTILE = 7; // the caption record that tries to run script
const DRAFT = 4; // records of `draft` (expired) and `preview` (tagged `prod`)
const CARD = {
  licence: "CC-BY-4.0",
  description: "Captions and images for the browser test",
  citation: "@misc{guideloom-browser, title={Browser test}}",
  readme: "# Browser test captions\n\nThirty captions. <script>window.__pwned = 3</script>\n",
};

function cborSnapshot(root, dir, id, n) {
  const input = path.join(dir, `${id}.jsonl`);
  fs.writeFileSync(input, Array.from({ length: n }, (_, i) => JSON.stringify({ id: `${id}-${i}` })).join("\n") + "\n");
  guideloom("write", root, "--work-id", id, input);
  guideloom("publish", root, "--dataset-id", "browser-test", "--snapshot-id", id);
}

function buildRoot(dir) {
  const root = path.join(dir, "root");
  cborSnapshot(root, dir, "draft", DRAFT);
  cborSnapshot(root, dir, "preview", DRAFT);
  const raw = path.join(dir, "images");
  fs.mkdirSync(raw);
  for (let i = 0; i < IMAGES; i++) {
    const size = 16 + 4 * i;
    const c = i % 3;
    const bytes = png(size, size, (x, y) => {
      const v = [40, 40, 40];
      v[c] = 255;
      return (x + y) % 8 < 4 ? v : [255, 255, 255];
    });
    fs.writeFileSync(path.join(raw, `${String(i).padStart(3, "0")}.png`), bytes);
  }
  guideloom("write", root, "--work-id", "images", "--format", "raw", raw);
  guideloom("publish", root, "--dataset-id", "browser-test", "--snapshot-id", "images");
  const labels = path.join(dir, "labels.jsonl");
  fs.writeFileSync(
    labels,
    Array.from({ length: IMAGES }, (_, i) => JSON.stringify(`${COLORS[i % 3]}-${i}`)).join("\n") + "\n",
  );
  guideloom("annotate", root, "--name", "label", "--snapshot", "images", labels);

  const captions = path.join(dir, "captions.jsonl");
  const lines = [];
  for (let i = 0; i < CAPTIONS; i++) {
    const text =
      i === HOSTILE
        ? `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">`
        : `caption number ${i}`;
    lines.push(JSON.stringify({ id: `cap-${i}`, text, tokens: [i, i + 1] }));
  }
  fs.writeFileSync(captions, lines.join("\n") + "\n");
  guideloom("write", root, "--work-id", "captions", captions);
  guideloom("publish", root, "--dataset-id", "browser-test", "--snapshot-id", "captions");
  for (const [version, scale] of [["v1", 1], ["v2", 10]]) {
    const scores = path.join(dir, `score-${version}.jsonl`);
    fs.writeFileSync(scores, Array.from({ length: CAPTIONS }, (_, i) => String(i * scale)).join("\n") + "\n");
    guideloom("annotate", root, "--name", "score", "--set-version", version, "--snapshot", "captions", scores);
  }
  const readme = path.join(dir, "README.md");
  fs.writeFileSync(readme, CARD.readme);
  guideloom(
    "card", root, "--snapshot-id", "captions", "--readme", readme,
    "--licence", CARD.licence, "--description", CARD.description, "--citation", CARD.citation,
    "--split", "train=0..20", "--split", "test=20..30", "--split", "pictures=images",
  );
  // The tag keeps `preview`; `draft` (not the latest, untagged, unannotated) expires.
  guideloom("tag", root, "prod", "preview");
  const gc = guideloom("gc", root, "--grace", "0s", "--keep-last", "1");
  check(/expired:\s+1 snapshot\(s\): draft/.test(gc), `gc expired draft only:\n${gc}`);
  const bench = path.join(dir, "bench.json");
  fs.writeFileSync(
    bench,
    JSON.stringify({
      results: [
        { group: "io/random_4KiB", bench: "ceiling_pread", median_ns: 2100 },
        { group: "io/random_4KiB", bench: "pread_sync", median_ns: 2300 },
        { group: "io/random_4KiB", bench: "mmap_sync", median_ns: 900 },
        { group: "dataset/get", bench: "get_async", median_ns: 5200 },
      ],
    }),
  );
  return { root, bench };
}

// ---- the server ----
async function serve(root, bench) {
  const child = spawn(BIN, ["serve", root, "--port", "0", "--bench", bench], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = readline.createInterface({ input: child.stdout });
  const first = await new Promise((resolve, reject) => {
    lines.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`guideloom serve exited with ${code}`)));
  });
  const match = /^listening on (http:\/\/127\.0\.0\.1:\d+\/)$/.exec(first);
  check(match, `unexpected first line: ${first}`);
  return { child, url: match[1] };
}

// ---- the browser ----
async function main() {
  check(BIN && fs.existsSync(BIN), `GUIDELOOM_BIN ${BIN} does not exist`);
  check(fs.existsSync(CHROMIUM), `no browser at ${CHROMIUM}`);
  fs.mkdirSync(OUT, { recursive: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "guideloom-browser-"));
  const { root, bench } = buildRoot(dir);
  const server = await serve(root, bench);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const problems = [];
  const shots = [];
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    page.on("console", (msg) => {
      if (msg.type() === "error" || /Content.Security.Policy/i.test(msg.text())) {
        problems.push(`console ${msg.type()}: ${msg.text()} (${page.url()})`);
      }
    });
    page.on("pageerror", (e) => problems.push(`page error: ${e.message} (${page.url()})`));
    page.on("dialog", (d) => {
      problems.push(`a dialog opened: ${d.message()}`);
      d.dismiss();
    });

    async function view(name) {
      await page.waitForLoadState("load");
      const csp = await page.evaluate(() => document.body.dataset.cspViolations);
      check(csp === "0", `${name}: ${csp} CSP violation(s) reported by the page`);
      const pwned = await page.evaluate(() => window.__pwned);
      check(pwned === undefined, `${name}: the hostile record ran script (${pwned})`);
      const file = path.join(OUT, `${name}.png`);
      await page.screenshot({ path: file, fullPage: true });
      shots.push(file);
    }
    const rows = () => page.$$eval("#records tbody tr", (trs) => trs.map((tr) => Number(tr.dataset.index)));
    const annotations = () => page.$$eval("#records tbody td.ann-cell", (tds) => tds.map((td) => td.textContent.trim()));

    // 1. Overview: every snapshot (the tag and the expired one marked), the annotation sets,
    // the latest card with its README as text.
    await page.goto(server.url);
    check((await page.textContent("#dataset-id")) === "browser-test", "overview: dataset id");
    const snapshots = await page.$$eval("#snapshots tbody tr", (trs) => trs.map((tr) => tr.dataset.snapshot));
    check(JSON.stringify(snapshots) === JSON.stringify(["captions", "images", "preview", "draft"]), `overview: snapshots ${snapshots}`);
    check((await page.$$("#sets tbody tr")).length === 3, "overview: three annotation set versions");
    const tagged = await page.$$eval('#snapshots tr[data-snapshot="preview"] .tagname', (s) => s.map((e) => e.textContent));
    check(JSON.stringify(tagged) === '["[prod]"]', `overview: preview tagged ${tagged}`);
    const draft = await page.$eval('#snapshots tr[data-snapshot="draft"]', (tr) => ({
      expired: tr.classList.contains("expired"),
      text: tr.textContent,
      records: tr.querySelectorAll('a[href^="/records"]').length,
      // Readable: the id cell's text colour differs from the background it is drawn on.
      color: getComputedStyle(tr.cells[1]).color,
      background: getComputedStyle(tr).backgroundColor,
      cellBackground: getComputedStyle(tr.cells[1]).backgroundColor,
    }));
    check(draft.expired && draft.text.includes("expired") && draft.records === 0, `overview: draft expired ${JSON.stringify(draft)}`);
    check(
      draft.color !== draft.background && draft.color !== draft.cellBackground && draft.text.includes("draft"),
      `overview: the expired row is readable ${JSON.stringify(draft)}`,
    );
    check((await page.textContent("#card-licence")) === CARD.licence, "overview: card licence");
    check((await page.textContent("#card-description")) === CARD.description, "overview: card description");
    check((await page.textContent("#card-citation")) === CARD.citation, "overview: card citation");
    check((await page.textContent("#card-readme pre")).trim() === CARD.readme.trim(), "overview: the README, as text");
    check((await page.$$("#card-splits tbody tr")).length === 3, "overview: three splits");
    await view("overview");

    // 1b. The card page, by its link; a split's link opens its records.
    await Promise.all([page.waitForNavigation(), page.click("#card h2 a")]);
    check(new URL(page.url()).search === "?snapshot=captions", `card page ${page.url()}`);
    check((await page.textContent("#card-licence")) === CARD.licence, "card page: licence");
    check((await page.textContent("#card-readme pre")).trim() === CARD.readme.trim(), "card page: the README");
    const splits = await page.$$eval("#card-splits tbody tr", (trs) => trs.map((tr) => [tr.dataset.split, tr.textContent]));
    check(
      JSON.stringify(splits) ===
        JSON.stringify([["pictures", "picturessnapshot images"], ["test", "testrecords 20..30 of captions"], ["train", "trainrecords 0..20 of captions"]]),
      `card page: splits ${JSON.stringify(splits)}`,
    );
    await view("card");
    await Promise.all([page.waitForNavigation(), page.click('#card-splits tr[data-split="test"] a')]);
    check((await page.$eval("tr.hit", (tr) => Number(tr.dataset.index))) === 20, "the test split's first record");

    // 2. Paging through the images, five per page, with their labels beside them.
    await page.goto(`${server.url}records?snapshot=images&per=5&set=label%2Fv1`);
    check(JSON.stringify(await rows()) === "[0,1,2,3,4]", `page 1 rows ${await rows()}`);
    await Promise.all([page.waitForNavigation(), page.click("#next")]);
    check(JSON.stringify(await rows()) === "[5,6,7,8,9]", `page 2 rows ${await rows()}`);
    const labels = await annotations();
    const expected = [5, 6, 7, 8, 9].map((i) => JSON.stringify(`${COLORS[i % 3]}-${i}`));
    check(JSON.stringify(labels) === JSON.stringify(expected), `labels ${labels} != ${expected}`);
    const thumbs = await page.$$eval("#records img.media", (imgs) => imgs.map((i) => i.naturalWidth));
    check(thumbs.length === 5 && thumbs.every((w) => w > 0), `thumbnails ${thumbs}`);
    await view("records-images-page2");

    // 3. An image record: the <img> decoded at its real size.
    await Promise.all([page.waitForNavigation(), page.click('#records tr[data-index="6"] a.open')]);
    check((await page.textContent("#record-index")) === "6", "record page index");
    const img = await page.$eval("#record img.media", (i) => ({ complete: i.complete, w: i.naturalWidth, h: i.naturalHeight }));
    check(img.complete && img.w === 16 + 4 * 6 && img.h === 16 + 4 * 6, `image decoded ${JSON.stringify(img)}`);
    await view("record-image");

    // 4. Switching snapshot (the select submits by itself), then the annotation set.
    await page.goto(`${server.url}records?snapshot=images&per=10`);
    await Promise.all([page.waitForNavigation(), page.selectOption("#snapshot-select", "captions")]);
    check((await page.textContent("#snapshot-id")) === "captions", "switched snapshot");
    check(JSON.stringify(await rows()) === "[0,1,2,3,4,5,6,7,8,9]", `captions rows ${await rows()}`);
    check((await page.textContent('#records tr[data-index="3"] td.value')).includes('"cap-3"'), "caption text");
    await Promise.all([page.waitForNavigation(), page.selectOption("#set-select", "score/v2")]);
    const scores = await annotations();
    check(JSON.stringify(scores) === JSON.stringify([0, 10, 20, 30, 40, 50, 60, 70, 80, 90].map(String)), `score/v2 ${scores}`);
    const hostile = await page.textContent(`#records tr[data-index="${HOSTILE}"] td.value`);
    check(hostile.includes("<script>window.__pwned = 1</script>"), `the hostile record is shown as text: ${hostile}`);
    await view("records-captions-score-v2");
    await Promise.all([page.waitForNavigation(), page.selectOption("#set-select", "score/v1")]);
    const v1 = await annotations();
    check(JSON.stringify(v1) === JSON.stringify([0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(String)), `score/v1 ${v1}`);

    // 4b. A tag in the snapshot select: its snapshot's records; the expired snapshot is listed,
    // marked and not selectable; its records page says why there are none.
    await page.goto(`${server.url}records?snapshot=images&per=10`);
    const options = await page.$$eval("#snapshot-select option", (os) =>
      os.map((o) => ({ value: o.value, text: o.textContent, disabled: o.disabled })),
    );
    const draftOption = options.find((o) => o.value === "draft");
    check(draftOption && draftOption.disabled && draftOption.text.includes("expired"), `select: draft ${JSON.stringify(options)}`);
    check(options.some((o) => o.value === "preview" && o.text === "preview [prod]"), `select: preview ${JSON.stringify(options)}`);
    await Promise.all([page.waitForNavigation(), page.selectOption("#snapshot-select", "prod")]);
    check((await page.textContent("#snapshot-id")) === "preview", "tag prod: snapshot preview");
    check((await page.textContent("#snapshot-tag")) === "prod", "tag prod: named");
    check(JSON.stringify(await rows()) === JSON.stringify([...Array(DRAFT).keys()]), `tag prod rows ${await rows()}`);
    check((await page.textContent('#records tr[data-index="1"] td.value')).includes('"preview-1"'), "tag prod: its records");
    await view("records-tag");
    await page.goto(`${server.url}records?snapshot=draft`);
    check((await page.textContent("#expired")).includes("expired"), "expired snapshot: the note");
    check((await page.$$("#records")).length === 0, "expired snapshot: no records table");
    await view("records-expired");
    await page.goto(`${server.url}records?snapshot=captions&per=10&set=score%2Fv1`);

    // 5. The page filter (client-side).
    await page.fill("#filter", "cap-4");
    const visible = await page.$$eval("#records tbody tr:not(.hidden)", (trs) => trs.map((tr) => Number(tr.dataset.index)));
    check(JSON.stringify(visible) === "[4]", `filter: ${visible}`);
    await view("records-filter");

    // 6. Jump to an index on another page.
    await page.fill("#jump-index", "27");
    await Promise.all([page.waitForNavigation(), page.press("#jump-index", "Enter")]);
    const hit = await page.$eval("tr.hit", (tr) => Number(tr.dataset.index));
    check(hit === 27, `jump: ${hit}`);
    check((await page.textContent("#page")) === "3", "jump: page 3");
    await view("records-jump");

    // 7. Shards and their health.
    await page.goto(`${server.url}shards?snapshot=captions`);
    check((await page.textContent("#healthy")) === "1", "shards: healthy");
    await view("shards");

    // 8. The bench page: one chart per group, one bar per result.
    await page.goto(`${server.url}bench`);
    check((await page.$$("figure.bench svg")).length === 2, "bench: two charts");
    check((await page.$$("figure.bench rect")).length === 4, "bench: four bars");
    await view("bench");
  } finally {
    await browser.close();
    server.child.kill("SIGTERM");
    await new Promise((resolve) => server.child.once("exit", resolve));
    fs.rmSync(dir, { recursive: true, force: true });
  }
  check(problems.length === 0, `console errors or CSP reports:\n  ${problems.join("\n  ")}`);
  console.log(`browser test ok: ${shots.length} views, screenshots: ${shots.map((s) => path.basename(s)).join(" ")}`);
}

main().catch((e) => {
  console.error(`browser test FAILED: ${e.stack || e}`);
  process.exit(1);
});
