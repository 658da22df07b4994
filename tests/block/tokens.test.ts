import { afterAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { readFileSync } from "node:fs";
import { O200K_TOKEN_SPLIT_REGEX } from "gpt-tokenizer/encodingParams/constants";
import { mergeLongPiecesFast } from "../../plugin/block/bpe.ts";
import { MAX_UNIT, splitUnits } from "../../plugin/block/units.ts";
import { countUnits, disposeTokens, textBound, tokenStats, unitBound } from "../../plugin/block/tokens.ts";
import { largestStall } from "../helpers/stall.ts";

const PLAIN_TEXT = { allowedSpecial: new Set<string>(), disallowedSpecial: new Set<string>() };

/**
 * gpt-tokenizer on this thread, loaded only after the stall test (it freezes the loop ~0.7 s). Long
 * pieces are merged as the counter merges them (heapMerge, equal to gpt-tokenizer's merging in
 * units.test.ts): gpt-tokenizer's own merging is quadratic, minutes for a 128 KB piece.
 */
const exact = async () => {
  const encoding = await import("gpt-tokenizer/encoding/o200k_base");
  mergeLongPiecesFast(encoding.default);
  return encoding.countTokens;
};

/** Resolves when `condition` holds, checking every 10 ms, or fails after `ms`. */
async function until(condition: () => boolean, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const WORST_128K: Record<string, string> = {
  "spaces": " ".repeat(128 * 1024),
  "spaces and newlines": " \n \t\n".repeat(32 * 1024),
  "one line of one letter": "a".repeat(128 * 1024),
  "zero-width chars": "\u200b".repeat(24 * 1024) + "x".repeat(128 * 1024 - 24 * 1024),
  "CJK without punctuation": "漢字仮名交じり文中国语".repeat(128 * 1024 / 11 / 3),
  "emoji": "👩‍💻🎉".repeat(128 * 1024 / 7),
  "digits": "1234567890".repeat(128 * 1024 / 10),
};

afterAll(() => disposeTokens());

describe("countUnits", () => {
  test("never blocks the main thread while the counter loads and counts (cold)", async () => {
    expect(tokenStats().alive).toBe(false);
    const units = splitUnits(readFileSync(new URL("../../README.md", import.meta.url), "utf8"));
    const { result, stallMs, wallMs } = await largestStall(() => countUnits(units));
    expect(result.length).toBe(units.length);
    expect({ stallMs, wallMs }).toEqual({ stallMs: expect.any(Number), wallMs: expect.any(Number) });
    expect(stallMs).toBeLessThan(20);
  });

  test("equals gpt-tokenizer per unit, special-token look-alikes as text", async () => {
    const countTokens = await exact();
    const units = [
      "",
      "\n",
      "<|endoftext|>\n",
      "a <|im_start|>b<|fim_prefix|>\n",
      "# Heading\n",
      "```ts\n",
      "  const x = await y(); // comment\n",
      "漢字仮名交じり文\n",
      "👩‍💻 \ud800 lone\n",
      "\ufeff---\n",
      ...splitUnits("x".repeat(MAX_UNIT * 3)),
    ];
    expect([...(await countUnits(units))]).toEqual(units.map((unit) => countTokens(unit, PLAIN_TEXT)));
  });

  // Most of these are one piece of 128 KB, one unit (see units.ts), merged in O(n log n) (bpe.ts):
  // 40-80 ms each here; a shared machine's load is the margin.
  test("a worst 128 KB input counts in < 250 ms once the counter is warm", async () => {
    const countTokens = await exact();
    await countUnits(["warm up\n", `${"-".repeat(4096)}\n`]);
    for (const [name, text] of Object.entries(WORST_128K)) {
      const units = splitUnits(text);
      const started = performance.now();
      const counts = await countUnits(units);
      const ms = performance.now() - started;
      expect({ name, under250ms: ms < 250, ms }).toEqual({ name, under250ms: true, ms });
      expect(counts.reduce((sum, count) => sum + count, 0)).toBe(units.reduce((sum, unit) => sum + countTokens(unit, PLAIN_TEXT), 0));
    }
  });

  test("a failed counter rejects with a clear error, and the next call starts a new one", async () => {
    await disposeTokens();
    // Killed while it loads its tables (~0.4 s), so it cannot have answered first.
    const pending = countUnits(["a unit nobody asked for before\n"]);
    // The counter starts once node:child_process has loaded (on the first exact count).
    await until(() => tokenStats().pid !== undefined, 2_000);
    const { pid } = tokenStats();
    process.kill(pid!, "SIGKILL");
    await expect(pending).rejects.toThrow(/token counter process exited/);
    expect([...(await countUnits(["again\n"]))]).toEqual([2]);
    expect(tokenStats().pid).not.toBe(pid);
  });

  test("the counter is let go when idle, and does not keep a process alive", async () => {
    await countUnits(["still here " + Math.random() + "\n"]);
    expect(tokenStats().alive).toBe(true);
    await until(() => !tokenStats().alive, 5_000);
    const script = `import { countUnits } from ${JSON.stringify(new URL("../../plugin/block/tokens.ts", import.meta.url).pathname)};
      console.log((await countUnits(["hello world\\n"]))[0]);`;
    const started = performance.now();
    const child = Bun.spawnSync([process.execPath, "-e", script], { timeout: 10_000 });
    expect(child.stdout.toString().trim()).toBe("3");
    // It exits when the count is in, not after the idle delay (nor never).
    expect(performance.now() - started).toBeLessThan(1_900);
  });
});

describe("unitBound", () => {
  test("is never below the exact count (property)", async () => {
    const countTokens = await exact();
    const ASCII = fc.string({ unit: fc.constantFrom(..."abcXYZ019 _-.,;:'\"`#*()[]{}<>|/\\!?=+\t\n"), maxLength: 300 });
    const MARKDOWN = fc
      .array(fc.constantFrom("# ", "## ", "- ", "* ", "1. ", "```ts\n", "```\n", "**bold**", "`code`", "[link](http://x.y/z)", "> ", "the ", "idempotent ", "configuration", " worktree's", "\n\n", "    ", "|---|", "&nbsp;"), { maxLength: 60 })
      .map((parts) => parts.join(""));
    const CODE = fc
      .array(fc.constantFrom("const ", "x", " = ", "await ", "fn(", ");", "\n", "  ", "\t", "{", "}", "=>", "0x1F", "123456", "import ", "\"str\"", "'s", "'LL", "__init__", "camelCaseName", "snake_case_name"), { maxLength: 60 })
      .map((parts) => parts.join(""));
    const UNICODE = fc.string({ unit: fc.constantFrom(..."漢字仮名中文한국어Ωé߷ਖ਼\u200b\u200d\u00a0\u2028\ufeff\ufffd", "👩‍💻", "🎉", "\ud800", "\udc00", "e\u0301"), maxLength: 120 });
    const ANY = fc.string({ unit: "binary", maxLength: 200 });
    const SPECIAL = fc
      .array(fc.constantFrom("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|fim_prefix|>", "<|endofprompt|>", "<|", "|>", "x", " "), { maxLength: 20 })
      .map((parts) => parts.join(""));
    const UNIT = fc.oneof(ASCII, MARKDOWN, CODE, UNICODE, ANY, SPECIAL).map((text) => splitUnits(text)[0] ?? "");
    fc.assert(
      fc.property(UNIT, (unit) => unitBound(unit) >= countTokens(unit, PLAIN_TEXT)),
      { numRuns: 5_000 },
    );
  });

  test("is never below the exact count on the worst inputs and real files, and stays close on real files", async () => {
    const countTokens = await exact();
    for (const text of Object.values(WORST_128K)) {
      for (const unit of new Set(splitUnits(text))) expect(unitBound(unit)).toBeGreaterThanOrEqual(countTokens(unit, PLAIN_TEXT));
    }
    const text = ["../../README.md", "../../examples/monorepo/AGENTS.md"].map((path) => readFileSync(new URL(path, import.meta.url), "utf8")).join("");
    let bound = 0;
    let exactTotal = 0;
    for (const unit of splitUnits(text)) {
      const [b, e] = [unitBound(unit), countTokens(unit, PLAIN_TEXT)];
      expect(b).toBeGreaterThanOrEqual(e);
      bound += b;
      exactTotal += e;
    }
    expect(textBound(text)).toBe(bound);
    expect(bound / exactTotal).toBeLessThan(1.15);
  });

  test("splits with gpt-tokenizer's own o200k regex and knows every shipped token as one", async () => {
    const { default: bpe } = await import("gpt-tokenizer/bpeRanks/o200k_base");
    const file = readFileSync(new URL("../../plugin/block/common-tokens.bin", import.meta.url));
    const common = JSON.parse(file.toString("utf8", 4, 4 + file.readUInt32LE(0))) as { rankLimit: number };
    let checked = 0;
    for (let rank = 0; rank < common.rankLimit; rank += 7) {
      const token = bpe[rank];
      if (typeof token !== "string" || token.includes("\ufeff")) continue;
      const pieces = [...token.matchAll(O200K_TOKEN_SPLIT_REGEX)];
      if (pieces.length !== 1 || pieces[0]![0] !== token) continue; // not a piece on its own
      expect({ token, bound: unitBound(token) }).toEqual({ token, bound: 1 });
      checked++;
    }
    expect(checked).toBeGreaterThan(5_000);
  });
});
