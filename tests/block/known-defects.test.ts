import { describe, expect, test } from "bun:test";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { compose } from "../../plugin/block/compose.ts";
import type { FileVersion } from "../../plugin/files/contained.ts";
import { recordingLogger } from "../files/helpers.ts";

/**
 * Known defects, left open (test.failing: each fails while the defect is there; fixed, it must become a
 * plain test). Found reviewing 80ca524..f76de62 (units end where o200k's pieces end; the lead goes with
 * the head). Each only over-counts or over-reads: no block exceeds its budget, no line is missed.
 */

const PLAIN_TEXT = { allowedSpecial: new Set<string>(), disallowedSpecial: new Set<string>() };
let serial = 0;
const version = (rel: string, body: string): FileVersion => {
  const n = serial++;
  return Object.freeze({ path: `/w/${rel}#${n}`, dir: `/w/${rel}`, rel, raw: body, body, frontmatter: {}, root: false, sha256: `h3${n}`, size: body.length, truncated: false, mtimeMs: 0 });
};

describe("a file's lead (its leading \\r, \\n and / run)", () => {
  // The lead is charged with the section head through frame = textBound: head + lead is one o200k
  // piece longer than 64 bytes, so it is charged its byte count (6,036 for this file) while it costs
  // 3,010 counted exactly. The file would fit whole at 4,000 (the whole block counts 3,048 at once).
  const body = "/\n".repeat(3000) + "x";

  test.failing("a file that fits whole counted at once is shown whole", async () => {
    const composed = await compose("system", [{ file: version("a/AGENTS.md", body), tier: 0 }], 4000, recordingLogger());
    const whole = await compose("system", [{ file: version("a/AGENTS.md", body), tier: 0 }], 100_000, recordingLogger());
    expect(countTokens(whole.text, PLAIN_TEXT)).toBeLessThan(3100);
    // Observed: "omitted" (and, at a budget of 100,000, `tokens` says 6,054 for a 3,048-token block).
    expect(composed.entries[0]!.state).toBe("whole");
  });

  test.failing("an omitted file is named with what it would cost, its lead included", async () => {
    const composed = await compose("system", [{ file: version("a/AGENTS.md", body), tier: 0 }], 2000, recordingLogger());
    expect(composed.entries[0]!.state).toBe("omitted");
    const named = /"a\/AGENTS\.md" \((\d+) tokens\)/.exec(composed.text);
    // Observed: named "(2 tokens)": only the units after the lead (here "x\n") are counted.
    expect(Number(named?.[1])).toBeGreaterThan(1000);
  });
});

// Not introduced by 80ca524..f76de62 (1f0d40b does the same): the note's line counts lines of the
// body, which parseFrontmatter has taken the frontmatter block off, while the model reads the file on disk.
test.failing("a cut note's line is the file's line, frontmatter included", async () => {
  const { parseFrontmatter } = await import("../../plugin/files/frontmatter.ts");
  const raw = '---\nglobs: ["*.ts"]\ndescription: x\n---\n' + Array.from({ length: 200 }, (_, i) => `line ${i + 1} of the body text here.`).join("\n");
  const { body, frontmatter } = parseFrontmatter(raw);
  const file: FileVersion = Object.freeze({ path: "/w/fm/AGENTS.md#h3", dir: "/w/fm", rel: "fm/AGENTS.md", raw, body, frontmatter, root: false, sha256: "h3fm", size: raw.length, truncated: false, mtimeMs: 0 });
  const composed = await compose("system", [{ file, tier: 0 }], 300, recordingLogger());
  const lastShown = /([^\n]*)\n\[cut to fit the budget: \d+ tokens left out; read "[^"]*" from line (\d+)\]/.exec(composed.text)!;
  const rawLines = raw.split("\n");
  // The line to read from is the one after the last line shown (observed: 4 lines earlier, "line 21 ..." after "line 24 ...").
  expect(rawLines[Number(lastShown[2]) - 2]).toBe(lastShown[1]);
});
