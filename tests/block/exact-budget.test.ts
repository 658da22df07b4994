import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { compose } from "../../plugin/block/compose.ts";
import { sectionOf } from "../../plugin/block/doc.ts";
import { modelText } from "../../plugin/block/escape.ts";
import type { BlockKind } from "../../plugin/block/plan.ts";
import { watchNotice } from "../../plugin/block/render.ts";
import type { FileVersion } from "../../plugin/files/contained.ts";
import { recordingLogger } from "../files/helpers.ts";
import { endsInFence } from "../helpers/fence.ts";

/**
 * The budget promise against the real tokenizer, through compose(): every block, its whole rendered
 * text counted at once by gpt-tokenizer's o200k (special-token look-alikes as text), costs at most its
 * budget and no more than compose() says; cuts are legal; what is left out is named with its exact
 * tokens (its units' counts, summed); a closer tier is whole before a farther one shows.
 */

const PLAIN_TEXT = { allowedSpecial: new Set<string>(), disallowedSpecial: new Set<string>() };
const exact = (text: string) => countTokens(text, PLAIN_TEXT);
const unitTokens = (units: readonly string[]) => units.reduce((total, unit) => total + exact(unit), 0);

let serial = 0;
const version = (rel: string, body: string): FileVersion => {
  const n = serial++;
  return Object.freeze({ path: `/w/${rel}#${n}`, dir: `/w/${rel}`, rel, raw: body, body, frontmatter: {}, root: false, sha256: `x${n}`, size: body.length, truncated: false, mtimeMs: 0 });
};

/** Line material that stresses the tokenizer's joins and the cutter's legal places. */
const fragment = fc.oneof(
  fc.constantFrom(
    "# Heading",
    "## 見出し",
    "### Rules:",
    "```",
    "````",
    "```ts",
    "~~~",
    "~~~~~",
    "  ```",
    "- item",
    "1. first",
    "/path/to/file",
    // A line ending in punctuation joins the next line's leading "/" into one piece (o200k's ` ?[^\s\p{L}\p{N}]+[\r\n/]*`).
    "ok!\n/x",
    "a`\n/usr/bin",
    "see).\r\n/a/b",
    "//",
    "'s",
    "'ll do",
    ".",
    "...",
    "!!",
    ")",
    "]:",
    "```.",
    "漢字とかなと한국어",
    "中文没有空格的长句子中文没有空格的长句子",
    "👩‍👩‍👧‍👦",
    "🏳️‍🌈",
    "😀😀",
    "e\u0301\u0323",
    "a\u0308",
    "\u0301",
    "\r",
    " ",
    "   ",
    "\t",
    "<system-reminder>",
    "</project-context>",
    "Instructions from: x",
    "&lt;",
    "123456789",
    "x".repeat(300),
    "ab".repeat(170),
    "=".repeat(280),
    "漢".repeat(200),
    "😀".repeat(140),
    "e\u0301".repeat(150),
    // Pieces that run over line breaks, blanks before a non-blank, long single pieces mid-line.
    "/",
    "!/",
    ".\n\n/",
    "\r\n",
    "\n\n",
    "\n  \n",
    "\t \t",
    "    indented",
    "a\t\t5",
    " ".repeat(300),
    "word ".repeat(60),
    "| --- ".repeat(50),
    "&lt;".repeat(70),
  ),
  fc.stringMatching(/^[a-z .,/]{1,12}$/),
  fc.string({ unit: "grapheme", maxLength: 6 }),
);
const line = fc.array(fragment, { minLength: 0, maxLength: 4 }).map((parts) => parts.join(""));
const body = fc
  .tuple(fc.array(line, { minLength: 1, maxLength: 14 }), fc.constantFrom("\n", "\r\n"), fc.boolean())
  .map(([lines, eol, final]) => lines.join(eol) + (final ? eol : ""));

const kinds: BlockKind[] = ["system", "delivery", "compaction"];

interface Case {
  readonly kind: BlockKind;
  readonly budget: number;
  readonly bodies: readonly string[];
  readonly tiers: readonly number[];
  /** delivery: which files are sent again as updated, and whether a deleted file's notice and a watch notice are said too. */
  readonly updated: readonly boolean[];
  readonly notices: boolean;
}

const caseOf = (most: number) =>
  fc
    .record({
      kind: fc.constantFrom(...kinds),
      budget: fc.integer({ min: 0, max: 400 }),
      files: fc.array(fc.tuple(body, fc.integer({ min: 0, max: 2 }), fc.boolean()), { minLength: 1, maxLength: most }),
      notices: fc.boolean(),
    })
    .map(({ kind, budget, files, notices }): Case => {
      const tiers = files.map(([, tier]) => tier).sort((a, b) => a - b);
      const updated = files.map(([, , again]) => kind === "delivery" && again);
      return { kind, budget, bodies: files.map(([text]) => text), tiers, updated, notices: kind === "delivery" && notices };
    });

/** What is wrong with the block composed for `c` (empty when nothing). */
async function problems(c: Case): Promise<string[]> {
  const files = c.bodies.map((text, i) => version(`p${i}/AGENTS.md`, text));
  const extras = {
    updated: new Set(files.filter((_, i) => c.updated[i]).map((file) => file.path)),
    deleted: c.notices ? ["gone/AGENTS.md"] : [],
    notices: c.notices ? [watchNotice("p0/AGENTS.md", "src/schema.sql", "changed")] : [],
  };
  const composed = await compose(c.kind, files.map((file, i) => ({ file, tier: c.tiers[i]! })), c.budget, recordingLogger(), extras);
  const found: string[] = [];
  const { text } = composed;
  if (composed.failed) return ["counter failed"];
  if (text === "") return found;
  const whole = exact(text);
  if (whole > c.budget) found.push(`counted at once ${whole} > budget ${c.budget}`);
  if (composed.tokens < whole) found.push(`the block says ${composed.tokens} tokens, counted at once ${whole}`);
  if (!text.isWellFormed()) found.push("lone surrogate in the block");
  // Each section: whole text, or a legal prefix with an exact note.
  files.forEach((file, i) => {
    const section = sectionOf(file.body);
    const model = modelText(file.body);
    const fileTokens = unitTokens(section.units);
    const entry = composed.entries[i]!;
    const head = `<context-file path="${file.rel}"`;
    const at = text.indexOf(head);
    if (entry.state === "whole" || entry.state === "cut") {
      if (at === -1) return void found.push(`${file.rel} ${entry.state} but not in the block`);
      const start = text.indexOf(">\n", at) + 2;
      const end = text.indexOf("</context-file>\n", start);
      const shown = text.slice(start, end);
      if (entry.state === "whole") {
        if (shown !== `${model}\n`) found.push(`${file.rel} whole but its text differs`);
        return;
      }
      const noteAt = shown.lastIndexOf("[cut to fit the budget: ");
      const note = /^\[cut to fit the budget: (\d+) tokens left out; read "[^"]*" from line (\d+)\]\n$/.exec(shown.slice(noteAt));
      if (noteAt === -1 || !note) return void found.push(`${file.rel} cut without its note`);
      // The kept text, and the line break the note adds when it does not end one: the kept units end
      // before the note or before that line break (the same bytes when both are the ends of units).
      const before = shown.slice(0, noteAt);
      const unitEnds = new Map<number, number>();
      for (let k = 0, length = section.lead.length; k < section.units.length; ) unitEnds.set((length += section.units[k++]!.length), k);
      const readings = [before, before.slice(0, -1)]
        .filter((kept) => before.endsWith("\n") && model.startsWith(kept) && unitEnds.has(kept.length))
        .map((kept) => {
          const wrong: string[] = [];
          if (endsInFence(kept)) wrong.push(`${file.rel} cut inside an open fence`);
          if (/[\uD800-\uDBFF]$/.test(kept)) wrong.push(`${file.rel} cut splits a surrogate pair`);
          if (/&(l|lt|#|#5|#58)$/.test(kept)) wrong.push(`${file.rel} cut inside an escape`);
          const leftOut = fileTokens - unitTokens(section.units.slice(0, unitEnds.get(kept.length)));
          if (Number(note[1]) !== leftOut) wrong.push(`${file.rel} note says ${note[1]} left out, its units ${leftOut}`);
          const line = kept.split("\n").length;
          if (Number(note[2]) !== line) wrong.push(`${file.rel} note says line ${note[2]}, the cut is on line ${line}`);
          return wrong;
        });
      if (readings.length === 0) return void found.push(`${file.rel} cut text ends no unit of the file past its lead`);
      if (readings.every((wrong) => wrong.length > 0)) found.push(...readings[0]!);
    } else {
      if (at !== -1) found.push(`${file.rel} omitted but shown`);
      const named = new RegExp(`"${file.rel.replace(/[./]/g, "\\$&")}" \\((\\d+) tokens\\)`).exec(text);
      if (named && Number(named[1]) !== fileTokens) found.push(`${file.rel} named with ${named[1]} tokens, its units ${fileTokens}`);
    }
  });
  // Priority: no file of a later tier is shown while one of an earlier tier is not whole (compaction: by order alone).
  const shown = composed.entries.map((entry) => entry.state === "whole" || entry.state === "cut");
  composed.entries.forEach((entry, i) => {
    if (entry.state === "whole") return;
    composed.entries.forEach((_, j) => {
      const later = c.kind === "compaction" ? j > i : c.tiers[j]! > c.tiers[i]!;
      if (later && shown[j]) found.push(`p${j} shown while p${i} (closer) is ${entry.state}`);
    });
  });
  return found;
}

/** One file of `repeats` lines ending in "!" each followed by a line starting with "/": line by line, each join would cost one token more counted at once. */
async function joined(kind: BlockKind, budget: number, repeats: number): Promise<{ whole: number; tokens: number }> {
  const composed = await compose(kind, [{ file: version("p/AGENTS.md", "ok!\n/x ".repeat(repeats)), tier: 0 }], budget, recordingLogger());
  return { whole: exact(composed.text), tokens: composed.tokens };
}

const RUNS = Number(process.env.EXACT_BUDGET_RUNS ?? 150);

describe("blocks counted at once by the real tokenizer", () => {
  for (const [name, files] of [["one file: every kind, budgets 0-400", 1], ["many files, tiers 0-2: every kind, budgets 0-400", 6]] as const) {
    test(name, async () => {
      await fc.assert(
        fc.asyncProperty(caseOf(files), async (c) => {
          expect(await problems(c)).toEqual([]);
        }),
        { numRuns: RUNS },
      );
    }, 60_000);
  }

  // o200k's piece ` ?[^\s\p{L}\p{N}]+[\r\n/]*` runs over a line break into the next line's "/":
  // "ok!\n" + "/x" are 2 + 1 tokens line by line, "ok!\n/x" is 4 at once. When units were lines,
  // 80 such pairs in a 300-token block were 367-376 tokens at once.
  test("a file of lines ending in punctuation before lines starting with \"/\" stays within the budget counted at once", async () => {
    for (const kind of kinds) {
      const { whole, tokens } = await joined(kind, 300, 80);
      expect({ kind, within: whole <= 300, says: tokens >= whole, used: whole > 250 }).toEqual({ kind, within: true, says: true, used: true });
    }
  });
});
