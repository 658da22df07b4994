import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { createRequire } from "node:module";
import { cutInsideFrontmatter, KNOWN_KEYS as KNOWN, onlyComments, parseFrontmatter, simpleYaml } from "../../plugin/files/frontmatter.ts";
import { cpuTimeOf } from "../helpers/stall.ts";

describe("frontmatter: a leading block is frontmatter only as a mapping with a known key", () => {
  test("a mapping with a known key is stripped and returned", () => {
    expect(parseFrontmatter("---\nroot: true\ndescription: API\n---\n# Body\n")).toEqual({ body: "# Body\n", frontmatter: { root: true, description: "API" } });
  });

  test("peers' keys count (globs, alwaysApply, applyTo, paths)", () => {
    expect(parseFrontmatter("---\nalwaysApply: true\n---\nx").frontmatter).toEqual({ alwaysApply: true });
    expect(parseFrontmatter("---\napplyTo: '**/*.ts'\n---\nx").body).toBe("x");
  });

  test("a prose block stays content, even one that parses as a mapping of unknown keys", () => {
    for (const text of ["---\nImportant: keep this\n---\nbody\n", "---\nsome prose, not YAML at all\n---\nbody", "---\n- a list\n---\nx", "---\n---\nx"]) {
      expect(parseFrontmatter(text)).toEqual({ body: text, frontmatter: {} });
    }
  });

  test("an unclosed block is content", () => {
    const text = "---\nroot: true\n# never closed\n";
    expect(parseFrontmatter(text)).toEqual({ body: text, frontmatter: {} });
  });

  test("---js is refused and never executed; the block is dropped with an error", () => {
    const flag = "__pc_frontmatter_ran";
    const parsed = parseFrontmatter(`---js\n(globalThis.${flag} = true, { root: true })\n---\nbody`);
    expect((globalThis as Record<string, unknown>)[flag]).toBeUndefined();
    expect(parsed.body).toBe("body");
    expect(parsed.frontmatter).toEqual({});
    expect(parsed.error).toContain("refused");
    for (const language of ["javascript", "coffee", "cson"]) expect(parseFrontmatter(`---${language}\nx\n---\nb`).error).toContain("refused");
  });

  test("invalid YAML whose lines name a known key: dropped from the body, fields unused, error reported", () => {
    const parsed = parseFrontmatter("---\nroot: true\ndescription: Rules: be nice\n---\n# Body\n");
    expect(parsed.body).toBe("# Body\n");
    expect(parsed.frontmatter).toEqual({});
    expect(parsed.error).toBeString();
  });

  test("invalid YAML without any known key is prose: kept whole, no error", () => {
    const text = "---\nnote: [unclosed\n---\nbody";
    expect(parseFrontmatter(text)).toEqual({ body: text, frontmatter: {} });
  });

  test("JSON blocks, CRLF line ends and a second document marker", () => {
    expect(parseFrontmatter('---json\n{"root": true}\n---\nj')).toEqual({ body: "j", frontmatter: { root: true } });
    expect(parseFrontmatter("---\r\nroot: true\r\n---\r\nbody")).toEqual({ body: "body", frontmatter: { root: true } });
    const twoDocs = "---\nroot: true\n---x\n---\nbody";
    expect(parseFrontmatter(twoDocs).body).toBe(twoDocs);
  });

  test("the frontmatter record is frozen", () => {
    expect(Object.isFrozen(parseFrontmatter("---\nroot: true\n---\n").frontmatter)).toBe(true);
  });
});

describe("frontmatter: plain mappings read without gray-matter", () => {
  const matter = createRequire(import.meta.url)("gray-matter") as (input: string, options: object) => { data: unknown };
  const viaGrayMatter = (inner: string): unknown => {
    try {
      return matter(`---\n${inner}\n---\n`, {}).data;
    } catch {
      return "throws";
    }
  };
  const KEY = fc.constantFrom("root", "include", "description", "paths", "globs", "alwaysApply", "priority", "merge", "watch", "owner", "true", "null", "Yes", "a_b", "x-y", "__proto__", "constructor", "9lives", "k");
  const PIECES = ["a", "Z", "0", "9", " ", "  ", "_", ".", "/", "(", ")", ",", ";", "+", "=", "@", "*", "'", '"', "-", ":", "#", "[", "]", "{", "}", "\\", "&", "!", "|", ">", "%", "`", "?", "\t", "é"];
  const word = fc.array(fc.constantFrom(...PIECES), { maxLength: 8 }).map((parts) => parts.join(""));
  const plain = fc.tuple(fc.constantFrom("a", "Z", "q", "T", "n"), word).map(([first, rest]) => first + rest);
  const keyword = fc.constantFrom("null", "Null", "NULL", "~", "true", "True", "TRUE", "false", "False", "FALSE", "yes", "no", "on", "off", "y", "n", "nan", ".nan", ".inf", "-.inf");
  const number = fc.constantFrom("0", "7", "12", "007", "0755", "1_000", "1:30", "1e3", "1.5", "-3", "+4", "0x1F", "0b101", "0o17", "123456789012345", "1234567890123456", "2024-01-02", "2001-12-14t21:59:43.10-05:00");
  const quoted = fc.oneof(word.map((text) => `"${text}"`), word.map((text) => `'${text}'`));
  const list = fc.tuple(fc.array(fc.oneof(quoted, plain), { maxLength: 4 }), fc.constantFrom(",", ", ", " , ")).map(([items, separator]) => `[${items.join(separator)}]`);
  const value = fc.oneof(plain, keyword, number, quoted, list, word, fc.constant(""));
  const line = fc.oneof(
    { weight: 8, arbitrary: fc.tuple(KEY, fc.constantFrom(": ", ":  ", ":", ": "), value, fc.constantFrom("", " ", "  ")).map(([key, colon, text, tail]) => `${key}${colon}${text}${tail}`) },
    { weight: 1, arbitrary: fc.constantFrom("", "  ", "# a comment", "  nested: 1", "- item", "key: value # note", "a: b: c", "k:\tv", "k: v\r", "<<: x", "? complex", "k: &anchor v", "k: *alias", "k: !!str 1") },
  );
  const noisy = fc.array(line, { minLength: 1, maxLength: 6 }).map((lines) => lines.join("\n"));
  // Blocks of the accepted shapes only (distinct keys), so that most runs compare a value.
  const SAFE = ["a", "Z", "0", " ", "_", ".", "/", "(", ")", ",", ";", "+", "=", "@", "*", "'", '"', "-"];
  const safeText = fc.array(fc.constantFrom(...SAFE.filter((piece) => piece !== "'" && piece !== '"')), { maxLength: 8 }).map((parts) => parts.join(""));
  const safePlain = fc.tuple(fc.constantFrom("a", "Z", "q"), fc.array(fc.constantFrom(...SAFE), { maxLength: 8 })).map(([first, rest]) => (first + rest.join("")).trimEnd());
  const safeQuoted = fc.oneof(safeText.map((text) => `"${text}"`), safeText.map((text) => `'${text}'`));
  const safeValue = fc.oneof(safePlain, fc.constantFrom("true", "False", "NULL", "0", "42", "123456789012345", "[]"), safeQuoted, fc.array(safeQuoted, { minLength: 1, maxLength: 3 }).map((items) => `[${items.join(", ")}]`));
  const clean = fc
    .uniqueArray(fc.tuple(KEY.filter((key) => !/^(__|\d)/.test(key)), safeValue), { selector: ([key]) => key, minLength: 1, maxLength: 6 })
    .map((pairs) => pairs.map(([key, text]) => `${key}: ${text}`).join("\n"));
  const block = fc.oneof(noisy, clean);

  test("whatever it reads is what gray-matter (js-yaml's safeLoad) reads (property)", () => {
    let read = 0;
    fc.assert(
      fc.property(block, (inner) => {
        const simple = simpleYaml(inner);
        if (simple === undefined) return;
        read++;
        expect(simple).toEqual(viaGrayMatter(inner) as Record<string, unknown>);
        // toEqual ignores key order; the order is part of what a mapping reads as.
        expect(Object.keys(simple)).toEqual(Object.keys(viaGrayMatter(inner) as object));
      }),
      { numRuns: 5_000 },
    );
    // The generator mostly makes blocks it reads: the property is not vacuous.
    expect(read).toBeGreaterThan(1_500);
  });

  test("a long run of blanks after the opening --- is read in linear time, with or without a language tag", () => {
    // Two runs of blanks around an optional tag made the engine try every split of the run: 16 s for 120,000 spaces.
    const run = " ".repeat(120_000);
    for (const text of [`---${run}1\n# Root\n`, `---${run}\n# Root\n`, `---${run}json${run}1\n`]) expect(parseFrontmatter(text)).toEqual({ body: text, frontmatter: {} });
    expect(cutInsideFrontmatter(`---${run}1\ninclude: always\n`)).toBe(false);
    expect(cutInsideFrontmatter(`---yaml${run}\ninclude: always\n`)).toBe(true);
    expect(parseFrontmatter(`---json${run}\n{"root": true}\n---\nx`)).toEqual({ body: "x", frontmatter: { root: true } });
  }, 2_000);

  test("a block with more than 64 YAML aliases is not parsed: js-yaml would make a key of a list of 20,000 aliases a 1.2 GB string", () => {
    const aliases = (n: number) => Array.from({ length: n }, () => "*s").join(",");
    const hostile = `---\ninclude: always\ns: &s ${"x".repeat(60_000)}\n? [${aliases(20_000)}]\n: 1\n---\n# Body\n`;
    expect(parseFrontmatter(hostile)).toEqual({ body: "# Body\n", frontmatter: {}, error: "uses more than 64 YAML aliases" });
    const bomb = `---\ninclude: always\na0: &a0 ["lol"]\n${Array.from({ length: 12 }, (_, i) => `a${i + 1}: &a${i + 1} [${Array(9).fill(`*a${i}`).join(",")}]`).join("\n")}\n---\nx`;
    expect(parseFrontmatter(bomb).error).toBe("uses more than 64 YAML aliases");
    // After a key's colon too (found in review: a mapping of aliases went uncounted).
    expect(parseFrontmatter(`---\ninclude: always\ns: &s x\nlist: [${Array(65).fill('{"a":*s}').join(",")}]\n---\nx`).error).toBe("uses more than 64 YAML aliases");
    // 64 are read as YAML reads them.
    expect(parseFrontmatter(`---\ninclude: always\ns: &s x\nlist: [${aliases(64)}]\n---\nx`).frontmatter).toEqual({ include: "always", s: "x", list: Array(64).fill("x") });
  }, 2_000);

  test("long runs of spaces where a value ends are read as gray-matter reads them, in linear time", () => {
    // A context file is read up to maxFileBytes (128 KiB): a run that long took the quadratic first
    // version minutes (0.8 s at 32 KB), past the test's time limit; read in linear time it is milliseconds.
    const run = " ".repeat(120_000);
    for (const inner of [`description: a${run}b`, `globs: ["a"${run}]`, `globs: ["a"${run}x]`, `root: true${run}`, `k:${run}`]) {
      const simple = simpleYaml(inner);
      if (simple !== undefined) expect(simple).toEqual(viaGrayMatter(inner) as Record<string, unknown>);
    }
    expect(simpleYaml(`description: a${run}b`)).toEqual({ description: `a${run}b` });
  });

  test("a block of many blank lines that gray-matter reads is read in linear time (its comment strip went back over every run of them)", () => {
    // gray-matter strips comments with /^\s*#[^\n]+/gm before parsing: from each line start \s* runs
    // to the end of the blank lines, so 64,000 of them took 1.3 s, a 128 KiB file about 5 s of blocked loop.
    const expected = { body: "# Body\n", frontmatter: { include: "always", list: [1], x: 1 } };
    for (const filler of ["\n", " \n", "\r\n", "\t \n"]) {
      const text = `---\ninclude: always\nlist: [1]\n${filler.repeat(Math.floor(120_000 / filler.length))}x: 1\n---\n# Body\n`;
      let parsed: ReturnType<typeof parseFrontmatter> | undefined;
      // Main-thread CPU time, so a loaded machine does not fail it (the first block loads gray-matter too).
      const ms = cpuTimeOf(() => (parsed = parseFrontmatter(text)));
      expect({ filler, parsed }).toEqual({ filler, parsed: expected });
      expect({ filler, fast: ms < 300 }).toEqual({ filler, fast: true });
    }
  });

  test("a block gray-matter takes for only comments is told as gray-matter tells it (property), and read as before", () => {
    const piece = fc.constantFrom(" ", "\t", "\n", "\r", "\r\n", "\u2028", "\u00a0", "\ufeff", "#", "# x", "a", ":", "k: v");
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 24 }).map((parts) => parts.join("")), (text) => {
        expect(onlyComments(text)).toBe(text.replace(/^\s*#[^\n]+/gm, "").trim() === "");
      }),
      { numRuns: 20_000 },
    );
    // Every generated block parses to what matter() itself gave (the engine is called as it calls it).
    fc.assert(
      fc.property(block, fc.constantFrom("", "yaml"), (inner, language) => {
        const text = `---${language}\n${inner}\n---\nbody`;
        const before = viaGrayMatter(inner);
        const known = typeof before === "object" && before !== null && !Array.isArray(before) && Object.keys(before).some((key) => KNOWN.has(key));
        const parsed = parseFrontmatter(text);
        if (before === "throws") expect(parsed.frontmatter).toEqual({});
        else if (known) expect(parsed).toEqual({ body: "body", frontmatter: before as Record<string, unknown> });
        else expect(parsed).toEqual({ body: text, frontmatter: {} });
      }),
      { numRuns: 3_000 },
    );
    // Through the parser, as gray-matter's matter() read them: comments only are content, JSON included.
    for (const text of ["---\n# only a comment\n\n  # another\n---\nx", "---json\n# c\n---\nx", "---yaml\n\n---\nx"]) expect(parseFrontmatter(text)).toEqual({ body: text, frontmatter: {} });
    expect(parseFrontmatter("---yaml\n# c\ninclude: always # why\n---\nx")).toEqual({ body: "x", frontmatter: { include: "always" } });
  });

  test("the shapes of real frontmatter are read without gray-matter, the rest left to it", () => {
    expect(simpleYaml('description: Conventions for api/AGENTS.md\nglobs: ["**/*.ts"]')).toEqual({ description: "Conventions for api/AGENTS.md", globs: ["**/*.ts"] });
    expect(simpleYaml("root: true\ninclude: always\npriority: high\nalwaysApply: false\npaths: ['src/**', \"lib/**\"]\nwatch: []\nmerge:")).toEqual({ root: true, include: "always", priority: "high", alwaysApply: false, paths: ["src/**", "lib/**"], watch: [], merge: null });
    for (const inner of ["paths:\n  - src/**", "globs: **/*.ts", "description: >\n  folded", "a: 1\na: 2", "mode: 0755", "x: é", "k: v # note", "__proto__: x"]) expect(simpleYaml(inner)).toBeUndefined();
  });
});
