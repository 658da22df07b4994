/**
 * Worst inputs for the block's pure core (issue 9, point 3): model text, units, boundaries, plan and
 * render of files up to 128 KB, at several budgets, must each take < 100 ms. Token counting is timed
 * apart (block/tokens.ts); here a unit costs ceil(UTF-8 bytes / 4), framing likewise. So must the
 * frontmatter of such a file (the in-process reader of plain mappings, or gray-matter after it).
 *
 *   npx bun bench/worst-inputs.ts
 */
import { boundaries, toDoc } from "../plugin/block/doc.ts";
import { plan, type PlanInput } from "../plugin/block/plan.ts";
import { renderBlock } from "../plugin/block/render.ts";
import { splitUnits } from "../plugin/block/units.ts";
import { parseFrontmatter } from "../plugin/files/frontmatter.ts";

const SIZE = 128 * 1024;
const LIMIT_MS = 100;
const RUNS = 7;
const BUDGETS = [50, 1_000, 8_000, 40_000];

const unitCost = (unit: string) => Math.ceil(Buffer.byteLength(unit) / 4);
const frame = (text: string) => splitUnits(text).reduce((total, unit) => total + unitCost(unit), 0);
/** `piece` repeated to SIZE characters. */
const fill = (piece: string) => piece.repeat(Math.ceil(SIZE / piece.length)).slice(0, SIZE);

const cases: Record<string, string[]> = {
  "96 KB whitespace run": [`a${" ".repeat(96 * 1024)}b\n${fill("rule\n").slice(0, 32 * 1024)}`],
  "128 KB single line": [fill("word ")],
  "`<` + 24k zero-width, repeated": [fill(`<${"\u200b".repeat(24_000)}/system-reminder>`)],
  "thousands of `<`": [fill("< </ <\n/ PROJECT-context <s\u200cystem ")],
  "128K empty lines": ["x" + "\n".repeat(SIZE - 2) + "y"],
  "deep fence nesting": [fill("`".repeat(200) + "\n").replace(/`{200}\n/g, (_, at: number) => `${"`".repeat(200 - ((at / 201) % 197))}\n`)],
  "alternating fences": [fill("```\ncode\n~~~~\n")],
  "10k headings": [fill("## Heading\ntext\n").slice(0, 10_000 * 16)],
  "surrogate pairs": [fill("😀")],
  "45 files of 2.8 KB": Array.from({ length: 45 }, (_, i) => fill(`# File ${i}\n\nrule ${i} of the file\n`).slice(0, 2_900)),
};

const rows: string[] = [];
let slow = false;
for (const [name, bodies] of Object.entries(cases)) {
  for (const budget of BUDGETS) {
    const times: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const started = performance.now();
      const items = bodies.map((body, i) => {
        const doc = toDoc(`${name}#${i}`, `d${i}/AGENTS.md`, body);
        boundaries(doc);
        return { doc, tier: i % 3, counts: Int32Array.from(doc.units, unitCost) };
      });
      const input: PlanInput = { kind: "system", items, budget, frame };
      const result = plan(input);
      if ("need" in result) throw new Error("all counts were given");
      renderBlock(input, result);
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    const [p50, max] = [times[RUNS >> 1]!, times[RUNS - 1]!];
    slow ||= max >= LIMIT_MS;
    rows.push(`| ${name} | ${budget} | ${p50.toFixed(1)} | ${max.toFixed(1)} |`);
  }
}
// Frontmatter: long runs of spaces where a value's end is looked for (gray-matter loaded first, untimed).
parseFrontmatter("---\nglobs: [\"a\" x]\n---\n");
const run = " ".repeat(60 * 1024);
const frontmatter: Record<string, string> = {
  "a plain value with a 60 KB space run": `description: a${run}b`,
  "a flow list with a 60 KB space run": `globs: ["a"${run}]`,
  "a flow list with a 60 KB space run, then not a list": `globs: ["a"${run}x]`,
  "8k keys": Array.from({ length: 8_000 }, (_, i) => `k${i}: v`).join("\n"),
};
const frontmatterRows: string[] = [];
for (const [name, inner] of Object.entries(frontmatter)) {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    parseFrontmatter(`---\n${inner}\n---\nbody\n`);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const [p50, max] = [times[RUNS >> 1]!, times[RUNS - 1]!];
  slow ||= max >= LIMIT_MS;
  frontmatterRows.push(`| ${name} | ${p50.toFixed(1)} | ${max.toFixed(1)} |`);
}
console.log(["| input (<= 128 KB) | budget | p50 ms | max ms |", "|---|---:|---:|---:|", ...rows].join("\n"));
console.log(["", "| frontmatter | p50 ms | max ms |", "|---|---:|---:|", ...frontmatterRows].join("\n"));
if (slow) {
  console.error(`some input took >= ${LIMIT_MS} ms`);
  process.exit(1);
}
