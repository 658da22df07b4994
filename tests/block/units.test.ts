import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import api, { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { O200K_TOKEN_SPLIT_REGEX } from "gpt-tokenizer/encodingParams/constants";
import { heapMerge, HEAP_MERGE_BYTES, mergeLongPiecesFast } from "../../plugin/block/bpe.ts";
import { boundaries, layout, sectionOf, toDoc } from "../../plugin/block/doc.ts";
import { headCost } from "../../plugin/block/plan.ts";
import { cutTail, sectionHead, WHOLE_TAIL } from "../../plugin/block/render.ts";
import { MAX_UNIT, splitUnits } from "../../plugin/block/units.ts";

/**
 * Units against o200k's own split (gpt-tokenizer's regex, matched over the whole text): they end only
 * where its pieces end, so counted apart they cost what the text costs at once; and the long-piece
 * merging of the counter process against gpt-tokenizer's own.
 */

const PLAIN_TEXT = { allowedSpecial: new Set<string>(), disallowedSpecial: new Set<string>() };
const exact = (text: string) => countTokens(text, PLAIN_TEXT);
const sum = (values: readonly number[]) => values.reduce((total, value) => total + value, 0);

/** Where o200k's pieces of `text` end, as gpt-tokenizer splits it. */
const pieceEnds = (text: string) => new Set([...text.matchAll(O200K_TOKEN_SPLIT_REGEX)].map((match) => match.index + match[0].length));

/** The offsets where `parts`, laid end to end from `from`, end. */
const endsOf = (parts: readonly string[], from = 0) => parts.map((part) => (from += part.length));

/** Texts made of what runs over line breaks, blanks before non-blanks, long single pieces and escapes. */
const fragment = fc.oneof(
  fc.constantFrom(
    "ok!", "/x", "/", "//", "!/", ".", "...", "```", "~~~", "  ```", "# Heading", "- item", "'s", "a\t\t5", "\t \t", "    indented",
    "\r\n", "\n", "\n\n", "\n  \n", "\r", " ", "   ", "\t", "\u3000", "\u00a0", "&lt;", "&#58;", "Instructions from: x", "</project-context>",
    "漢字とかな", "👩‍👩‍👧‍👦", "😀😀", "e\u0301", "\u0301", "123456789",
    "x".repeat(300), "=".repeat(300), " ".repeat(300), "\n".repeat(300), "/".repeat(300), "漢".repeat(300), "😀".repeat(140),
    "word ".repeat(60), "| --- ".repeat(50), "&lt;".repeat(70), "ok!\n/x ".repeat(40),
  ),
  fc.stringMatching(/^[a-z .,!/\n]{1,12}$/),
  fc.string({ unit: "grapheme", maxLength: 6 }),
);
const text = fc.array(fragment, { maxLength: 16 }).map((parts) => parts.join(""));

/** Whether `at` falls inside an escape escape.ts writes. */
const insideEscape = (whole: string, at: number) =>
  ["&lt;", "&#58;"].some((escape) => [1, 2, 3, 4].some((back) => back < escape.length && whole.startsWith(escape, at - back)));

/** What units.ts rules out as a unit's end, written apart: right after a blank a non-blank follows, or inside an escape. */
const mayEnd = (whole: string, at: number) =>
  at === whole.length || (!(/\s/.test(whole[at - 1]!) && !/[\r\n]/.test(whole[at - 1]!) && !/\s/.test(whole[at]!)) && !insideEscape(whole, at));

describe("units", () => {
  test("end only where o200k's pieces of the whole text end, and cost what the text costs at once", () => {
    fc.assert(
      fc.property(text, (whole) => {
        const units = splitUnits(whole);
        expect(units.join("")).toBe(whole);
        const ends = pieceEnds(whole);
        expect(endsOf(units).filter((end) => !ends.has(end))).toEqual([]);
        expect(sum(units.map(exact))).toBe(exact(whole));
      }),
      { numRuns: 400 },
    );
  });

  test("are at most MAX_UNIT long but where no piece within MAX_UNIT may end one (one piece longer, mostly)", () => {
    fc.assert(
      fc.property(text, (whole) => {
        const units = splitUnits(whole);
        let start = 0;
        for (const unit of units) {
          if (unit.length > MAX_UNIT) {
            const early = [...pieceEnds(whole.slice(start))].filter((end) => end <= MAX_UNIT && mayEnd(whole, start + end));
            expect({ unit, early }).toEqual({ unit, early: [] });
          }
          start += unit.length;
        }
      }),
      { numRuns: 400 },
    );
  });

  test("in a section: the head takes in the lead, and every legal cut ends where the block's pieces end", () => {
    fc.assert(
      fc.property(text, fc.boolean(), (body, updated) => {
        const doc = toDoc("k", "p/AGENTS.md", body);
        const { lead, units } = sectionOf(body);
        expect([doc.lead, doc.units]).toEqual([lead, units]);
        expect(/^[\r\n/]*$/.test(lead) && !/^[\r\n/]/.test(units[0] ?? "")).toBe(true);
        const head = sectionHead(doc.rel, updated) + lead;
        const { ranks, lines } = layout(doc);
        for (let k = 1; k <= units.length; k++) {
          if (ranks[k] === 0) continue;
          const kept = units.slice(0, k);
          const tail = k === units.length ? WHOLE_TAIL : cutTail(doc.rel, 7, lines[k]!, kept[k - 1]!.endsWith("\n"));
          const block = head + kept.join("") + tail;
          const ends = pieceEnds(block);
          expect(endsOf([head, ...kept]).filter((end) => !ends.has(end))).toEqual([]);
          expect(exact(head) + sum(kept.map(exact)) + exact(tail)).toBe(exact(block));
        }
      }),
      { numRuns: 200 },
    );
  });

  test("lines counted apart can cost less than at once: a piece runs over the line break", () => {
    expect([exact("ok!\n"), exact("/x"), exact("ok!\n/x")]).toEqual([2, 1, 4]);
    expect([...pieceEnds("ok!\n/x")]).toEqual([2, 5, 6]);
    expect(splitUnits("ok!\n/x")).toEqual(["ok!\n/x"]);
  });

  test("lines: a blank line joins the line before it, a \"/\" line after punctuation runs on to its first word", () => {
    expect(splitUnits("para\n\n  \nnext\n    indented\n/path\nsee.\n/usr/bin and more\nend")).toEqual([
      "para\n\n  \n",
      "next\n",
      "    indented\n",
      "/path\n",
      "see.\n/usr",
      "/bin and more\n",
      "end",
    ]);
    const doc = toDoc("k", "p/AGENTS.md", "\n\n# Title\npara.\n\n/x and y\n```\ncode\n\n```\nend");
    expect(doc.lead).toBe("\n\n");
    expect(doc.units).toEqual(["# Title\n", "para.\n\n/x", " and y\n", "```\n", "code\n\n", "```\n", "end\n"]);
    // Cut before: nothing (never), para (LINE), " and y" (a chunk after a word), the fence (LINE),
    // inside it (never), after it (LINE), everything; each note reads on from the line the unit starts on.
    expect([...boundaries(doc)]).toEqual([0, 2, 1, 2, 0, 0, 2, 4]);
    expect([...layout(doc).lines]).toEqual([3, 4, 6, 7, 8, 10, 11, 12]);
  });

  test("a long line is cut after a word, never after punctuation, and one long piece is one unit", () => {
    const words = toDoc("k", "p/AGENTS.md", "word ".repeat(100).trim());
    expect(words.units.map((unit) => unit.length)).toEqual([254, 246]);
    expect(words.units[0]!.endsWith("word")).toBe(true);
    expect([...boundaries(words)]).toEqual([0, 1, 4]);
    const rule = toDoc("k", "p/AGENTS.md", `intro\n${"| --- ".repeat(100)}|\nafter`);
    expect(rule.units.length).toBeGreaterThan(3);
    expect([...boundaries(rule)].slice(1, -2).filter((rank) => rank === 1)).toEqual([]);
    expect(toDoc("k", "p/AGENTS.md", `${"=".repeat(1000)}\nx`).units).toEqual([`${"=".repeat(1000)}\n`, "x\n"]);
    const cjk = toDoc("k", "p/AGENTS.md", `${"漢字".repeat(200)}\nx`);
    expect(cjk.units).toEqual([`${"漢字".repeat(200)}\n`, "x\n"]);
    expect([...boundaries(cjk)]).toEqual([0, 2, 4]);
  });

  test("a cut inside a line never leaves the line opening a fence (found by the exact-budget property)", () => {
    // "````# Heading```" opens no fence (a backtick fence's info string has no backtick); cut short, it would.
    const heading = toDoc("k", "p/AGENTS.md", `\`\`\`\`# Heading\`\`\`${"😀".repeat(150)}\nafter`);
    expect(heading.units[0]).toBe("````# Heading");
    expect([...boundaries(heading)]).toEqual([0, 0, 2, 4]);
    const words = toDoc("k", "p/AGENTS.md", `\`\`\`a\`b ${"word ".repeat(60)}`);
    expect([...boundaries(words)]).toEqual([0, 1, 4]);
  });

  test("a file's leading line breaks and \"/\" are one piece with the end of its section's opening tag, and counted with it", () => {
    const doc = toDoc("k", "p/AGENTS.md", "\n\n/x\n# Title");
    expect([doc.lead, doc.units]).toEqual(["\n\n/", ["x\n", "# Title\n"]]);
    const head = sectionHead(doc.rel, false);
    const ends = pieceEnds(head + doc.lead + doc.units.join(""));
    expect([ends.has(head.length), ends.has(head.length + doc.lead.length)]).toEqual([false, true]);
    const frame = (text: string) => text.length;
    expect([headCost(doc, false, frame), headCost(doc, true, frame)]).toEqual([frame(head + doc.lead), frame(sectionHead(doc.rel, true) + doc.lead)]);
  });
});

describe("long pieces in the counter", () => {
  const core = (api as unknown as { bytePairEncodingCoreProcessor: { bytePairMerge(piece: Uint8Array): number[]; getBpeRankFromBytes(bytes: Uint8Array): number | undefined } })
    .bytePairEncodingCoreProcessor;
  const rankOf = (bytes: Uint8Array) => core.getBpeRankFromBytes(bytes);
  const original = core.bytePairMerge.bind(core);

  test("heapMerge makes gpt-tokenizer's merges, token for token", () => {
    const utf8 = new TextEncoder();
    const piece = fc.oneof(
      fc.array(fc.constantFrom("a", "b", "e", "in", "the", "ing", " ", "  ", "\n", "=", "-", "漢", "字", "😀", "é", "\u0301", "0", "12"), { minLength: 1, maxLength: 300 }).map((parts) => utf8.encode(parts.join(""))),
      fc.uint8Array({ minLength: 1, maxLength: 600 }),
    );
    fc.assert(
      fc.property(piece, (bytes) => {
        expect(heapMerge(bytes, rankOf)).toEqual(original(bytes));
      }),
      { numRuns: 300 },
    );
  });

  test("gpt-tokenizer 4.0 merges with it, as the counter process makes it, pieces over HEAP_MERGE_BYTES: a 128 KB piece in well under a second", () => {
    const long = `${"漢字".repeat(HEAP_MERGE_BYTES)} 1`;
    const own = exact(long);
    expect(mergeLongPiecesFast({})).toBe(false);
    expect(mergeLongPiecesFast(api)).toBe(true);
    api.clearMergeCache();
    expect(exact(long)).toBe(own);
    const started = performance.now();
    expect(exact(" ".repeat(128 * 1024))).toBeGreaterThan(0);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});
