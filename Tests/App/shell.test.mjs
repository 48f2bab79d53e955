// The service worker's app shell (docs/protocol.md "Notifications and the service worker": the
// shell is cached so the history opens offline): every module the page loads, the catalog, the
// style and the icons.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const APP = fileURLToPath(new URL("../../Sources/Relay/Resources/app/", import.meta.url));
const worker = readFileSync(APP + "sw.js", "utf8");

test("every module of the page is in the shell the worker caches", () => {
  const listed = JSON.parse(/const MODULES = (\[[^\]]*\])/.exec(worker)[1].replace(/\s+/g, " "));
  const modules = readdirSync(APP).filter((name) => name.endsWith(".js") && name !== "sw.js" && name !== "consent.js")
    .map((name) => name.slice(0, -3)).sort();
  assert.deepEqual([...listed].sort(), modules);
  for (const file of ["strings.json", "app.css", "manifest.webmanifest", "icon-192.png", "icon-maskable-512.png"]) {
    assert.ok(worker.includes(`"/app/${file}"`), file);
  }
});

test("the manifest has an icon for any purpose and a maskable one, and the theme colour", () => {
  const manifest = JSON.parse(readFileSync(APP + "manifest.webmanifest", "utf8"));
  assert.equal(manifest.theme_color, "#1f6feb");
  assert.ok(manifest.icons.some((icon) => icon.purpose === "maskable" && icon.sizes === "512x512"));
  assert.ok(manifest.icons.some((icon) => icon.purpose === "any" && icon.sizes === "512x512"));
  for (const icon of manifest.icons) assert.ok(readdirSync(APP).includes(icon.src.replace("/app/", "")), icon.src);
});
