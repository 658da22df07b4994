/**
 * Token counting as the plugin pays for it: main-thread stall while the counter process loads and
 * counts (cold), first and warm count latency, RSS before / while / after the idle let-go, the
 * worst 128 KB inputs, and how close the bound is to the exact count. `bun bench/tokens-probe.ts`
 */
import { readFileSync } from "node:fs";
import { Glob } from "bun";
import { splitUnits } from "../plugin/block/units.ts";
import { countUnits, disposeTokens, textBound, tokenStats } from "../plugin/block/tokens.ts";

const mb = () => (process.memoryUsage().rss / 2 ** 20).toFixed(1);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const repo = new URL("..", import.meta.url).pathname;
const read = (path: string) => readFileSync(repo + path, "utf8");

let last = performance.now();
let stall = 0;
const monitor = setInterval(() => ([stall, last] = [Math.max(stall, performance.now() - last), performance.now()]), 1);
await sleep(100);
const rssBefore = mb();
const readme = splitUnits(read("README.md"));
let started = performance.now();
await countUnits(readme);
console.log(`cold count of README (${readme.length} units): ${(performance.now() - started).toFixed(0)} ms, largest main-thread stall ${stall.toFixed(1)} ms`);
const file20k = splitUnits(read("README.md").slice(0, 20_000).replaceAll("e", "é"));
started = performance.now();
await countUnits(file20k);
console.log(`warm count of a 20 KB file: ${(performance.now() - started).toFixed(1)} ms; RSS before ${rssBefore} MB, while alive ${mb()} MB`);

// Repeated chunks are counted once; the "distinct" inputs have no two units alike.
const pick = (alphabet: string, length: number) => Array.from({ length }, (_, i) => alphabet[(i * 7919 + ((i * i) >> 3)) % alphabet.length]).join("");
const worst = { spaces: " ".repeat(131_072), "one letter": "a".repeat(131_072), "zero-width": "\u200b".repeat(24_576), CJK: "漢字仮名交じり文中国语".repeat(3_971),
  "distinct letters, no space": pick("abcdefghijklmnopqrstuvwxyz", 131_072), "distinct whitespace": pick(" \t \u00a0  \u3000", 131_072), "distinct CJK": pick("漢字仮名交じり文中国语言处理", 43_690) };
for (const [name, text] of Object.entries(worst)) {
  started = performance.now();
  await countUnits(splitUnits(text));
  const countMs = performance.now() - started;
  started = performance.now();
  textBound(text);
  console.log(`worst ${name} (${text.length} chars): warm count ${countMs.toFixed(1)} ms, bound ${(performance.now() - started).toFixed(1)} ms`);
}
clearInterval(monitor);

const paths = ["examples/monorepo", "tests/fixtures"].flatMap((dir) => [...new Glob(`${dir}/**/*.md`).scanSync({ cwd: repo })]).filter((path) => /(AGENTS|CLAUDE)\.md$/.test(path));
const files = paths.map(read).concat([read("README.md")]);
const exact = (await countUnits(files.flatMap(splitUnits))).reduce((total, count) => total + count, 0);
const bound = files.reduce((total, text) => total + textBound(text), 0);
console.log(`bound/exact on ${paths.length} AGENTS/CLAUDE files + README: ${bound}/${exact} = ${(bound / exact).toFixed(3)}`);

const deadline = performance.now() + 10_000;
while (tokenStats().alive && performance.now() < deadline) await sleep(50);
await sleep(3_000);
const rssAfter = mb();
Bun.gc(true);
console.log(`counter alive: ${tokenStats().alive}; RSS 3 s after the let-go ${rssAfter} MB, after a full GC ${mb()} MB (before ${rssBefore} MB)`);
await disposeTokens();
