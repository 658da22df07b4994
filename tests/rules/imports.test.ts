import { afterEach, describe, expect, test } from "bun:test";
import { statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import fc from "fast-check";
import { readContained } from "../../plugin/files/contained.ts";
import {
  expandImports,
  importLines,
  MAX_IMPORT_DEPTH,
  MAX_IMPORT_TARGETS,
  MAX_IMPORTED_CHARS,
  MAX_READ_CHARS,
  type ImportedFile,
  type ImportRead,
} from "../../plugin/rules/imports.ts";
import { outline } from "../../plugin/rules/merge.ts";
import { Scratch } from "../files/helpers.ts";

const W = "/w";

/** An in-memory worktree at /w: path → text; counts every read. */
function memory(files: Record<string, string>): ImportRead & { reads: string[] } {
  const reads: string[] = [];
  const read = (absolute: string) => {
    reads.push(absolute);
    const body = files[absolute.slice(W.length + 1)];
    if (body === undefined) return { problem: "not found" };
    return { path: absolute, rel: absolute.slice(W.length + 1), body, sha256: `sha-${absolute}` } satisfies ImportedFile;
  };
  return Object.assign(read, { reads });
}

const targets = (body: string) => importLines(body).map(({ line, target }) => [line, target]);

describe("importLines", () => {
  test("a line that is only @ and a path-like target", () => {
    expect(targets("@docs/style.md\n@./local\n@../up.txt\n@/from/root\n@NOTES.txt  \r\n@docs/café.md\n@a.b.c.mdx")).toEqual([
      [1, "docs/style.md"],
      [2, "./local"],
      [3, "../up.txt"],
      [4, "/from/root"],
      [5, "NOTES.txt"],
      [6, "docs/café.md"],
      [7, "a.b.c.mdx"],
    ]);
  });

  test("mentions, emails, package names, prose, indentation, inline code and invisible characters are not imports", () => {
    const body = [
      "@john", "@john said hi", "@everyone", "mail me@x.com", "@types/node", "@babel/core", "  @indented.md", "- @list.md",
      "`@code.md`", "@code`x`.md", "@file.md trailing words", "@", "@.", "@..", "@name.", "@.hidden", "@a..md", "@a.md\u200b",
      "@a\u202e.md", "@a\u00a0b.md", "x @inline.md",
    ].join("\n");
    expect(targets(body)).toEqual([]);
  });

  test("``` and ~~~ fences, however long or indented, are not scanned", () => {
    const body = "@1.md\n```\n@2.md\n```\n@3.md\n  ~~~~ info\n@4.md\n~~~\n@5.md\n~~~~\n````\n```\n@6.md\n````\n@7.md\n```\n@8.md";
    expect(targets(body)).toEqual([[1, "1.md"], [5, "3.md"], [15, "7.md"]]);
  });

  test("inline code running over lines is not scanned; a backslash-escaped backtick opens nothing", () => {
    expect(targets("see ``\n@in.md\n`` here\n@out.md")).toEqual([[4, "out.md"]]);
    expect(targets("see `\n@in.md\n`\n\n@after-blank.md\n`")).toEqual([[5, "after-blank.md"]]);
    expect(targets("an unmatched ``\n@free.md\n` single")).toEqual([[2, "free.md"]]);
    expect(targets("escaped \\`\n@free.md\n`")).toEqual([[2, "free.md"]]);
    expect(targets("escaped \\``\n@in.md\n`")).toEqual([]);
    // A span never crosses a heading or a blank line.
    expect(targets("`\n## h\n@free.md\n`")).toEqual([[3, "free.md"]]);
  });

  test("linear on worst inputs: 128 KB of @-lines, backtick runs of every length, one 128 KB line", () => {
    const inputs = [
      "@a.md\n".repeat(21_000),
      Array.from({ length: 400 }, (_, i) => `${"`".repeat(i + 1)}\n@x.md\n`).join(""),
      "`\n@x.md\n".repeat(16_000),
      `@${"a.".repeat(64_000)}!`,
      `@${"\\".repeat(64_000)}\`.md`,
    ];
    for (const input of inputs) {
      const started = performance.now();
      importLines(input);
      expect(performance.now() - started).toBeLessThan(1_000);
    }
  });
});

describe("expandImports (in memory)", () => {
  test("inlines each import between markers, nested imports resolved from the importing file's directory", () => {
    const read = memory({ "docs/style.md": "Style.\n@parts/tabs.md\n", "docs/parts/tabs.md": "Tabs.", "top.md": "Top.\n" });
    const expansion = expandImports("# Rules\n@docs/style.md\nafter\n@/top.md\n", `${W}/AGENTS.md`, W, read);
    expect(expansion.text).toBe(
      "# Rules\n[imported from docs/style.md]\nStyle.\n[imported from docs/parts/tabs.md]\nTabs.\n[end of docs/parts/tabs.md]\n[end of docs/style.md]\nafter\n[imported from top.md]\nTop.\n[end of top.md]\n",
    );
    expect(expansion.imports.map((f) => f.rel)).toEqual(["docs/style.md", "docs/parts/tabs.md", "top.md"]);
    expect(expansion.problems).toEqual([]);
    expect(read.reads).toEqual([`${W}/docs/style.md`, `${W}/docs/parts/tabs.md`, `${W}/top.md`]);
  });

  test("a body without imports is the very same string", () => {
    const body = "no imports\n```\n@x.md\n```\n";
    expect(expandImports(body, `${W}/AGENTS.md`, W, memory({})).text).toBe(body);
  });

  test("outside the worktree lexically: refused without a read, one problem, the line kept", () => {
    const read = memory({ "etc/passwd.md": "inside\n" });
    const body = "@../../etc/passwd.md\n@/../x.md\n@../../etc/passwd.md\n@sub/../../../x.md\n@/etc/passwd.md\n";
    const expansion = expandImports(body, `${W}/a/AGENTS.md`, W, read);
    expect(expansion.text).toBe("@../../etc/passwd.md\n@/../x.md\n@../../etc/passwd.md\n@sub/../../../x.md\n[imported from etc/passwd.md]\ninside\n[end of etc/passwd.md]\n");
    expect(read.reads).toEqual([`${W}/etc/passwd.md`]);
    expect(expansion.problems).toEqual([
      { value: "@../../etc/passwd.md", message: 'a/AGENTS.md: import "@../../etc/passwd.md" leads outside the worktree; the line is kept as written' },
      { value: "@/../x.md", message: 'a/AGENTS.md: import "@/../x.md" leads outside the worktree; the line is kept as written' },
      { value: "@sub/../../../x.md", message: 'a/AGENTS.md: import "@sub/../../../x.md" leads outside the worktree; the line is kept as written' },
    ]);
  });

  test("missing: one problem per file and value, the line kept", () => {
    const read = memory({ "b.md": "@gone.md\n" });
    const expansion = expandImports("@gone.md\n@gone.md\n@b.md\n", `${W}/AGENTS.md`, W, read);
    expect(expansion.text).toBe("@gone.md\n@gone.md\n[imported from b.md]\n@gone.md\n[end of b.md]\n");
    expect(expansion.problems.map((p) => p.message)).toEqual([
      'AGENTS.md: import "@gone.md" not found; the line is kept as written',
      'b.md: import "@gone.md" not found; the line is kept as written',
    ]);
    expect(read.reads.filter((path) => path === `${W}/gone.md`)).toHaveLength(1);
  });

  test("self imports and cycles are broken: each file once, the repeat line kept", () => {
    const read = memory({ "AGENTS.md": "@AGENTS.md\n", "a.md": "A\n@b.md\n", "b.md": "B\n@a.md\n@AGENTS.md\n@b.md\n" });
    const expansion = expandImports("@AGENTS.md\n@a.md\n@b.md\n", `${W}/AGENTS.md`, W, read);
    expect(expansion.text).toBe("@AGENTS.md\n[imported from a.md]\nA\n[imported from b.md]\nB\n@a.md\n@AGENTS.md\n@b.md\n[end of b.md]\n[end of a.md]\n@b.md\n");
    expect(expansion.imports.map((f) => f.rel)).toEqual(["a.md", "b.md"]);
    expect(expansion.problems).toEqual([]);
  });

  test(`depth: the context file is level 0, imports go to level ${MAX_IMPORT_DEPTH}`, () => {
    const files: Record<string, string> = {};
    for (let level = 1; level <= 7; level++) files[`l${level}.md`] = `level ${level}\n@l${level + 1}.md\n`;
    const read = memory(files);
    const expansion = expandImports("@l1.md\n", `${W}/AGENTS.md`, W, read);
    expect(expansion.imports.map((f) => f.rel)).toEqual(["l1.md", "l2.md", "l3.md", "l4.md", "l5.md"]);
    expect(expansion.text).toContain("level 5\n@l6.md\n[end of l5.md]");
    expect(read.reads).not.toContain(`${W}/l6.md`);
    expect(expansion.problems).toEqual([{ value: "@l6.md", message: 'l5.md: import "@l6.md" is not followed: imports nest 5 levels deep at most; the line is kept as written' }]);
  });

  test("seen carries the files already in the block across calls", () => {
    const read = memory({ "shared.md": "Shared.\n" });
    const seen = new Set<string>();
    const first = expandImports("@/shared.md\n", `${W}/a/AGENTS.md`, W, read, seen);
    const second = expandImports("@../shared.md\n@/a/AGENTS.md\n", `${W}/b/AGENTS.md`, W, read, seen);
    expect(first.imports).toHaveLength(1);
    expect(second.text).toBe("@../shared.md\n@/a/AGENTS.md\n");
    expect(second.imports).toEqual([]);
    expect([...seen].sort()).toEqual([`${W}/a/AGENTS.md`, `${W}/b/AGENTS.md`, `${W}/shared.md`]);
  });

  test("an imported file that leaves a fence open is closed before its end marker", () => {
    const read = memory({ "code.md": "~~~~sh\nnpm test\n## not a heading" });
    const expansion = expandImports("@code.md\n## Next\n", `${W}/AGENTS.md`, W, read);
    expect(expansion.text).toBe("[imported from code.md]\n~~~~sh\nnpm test\n## not a heading\n~~~~\n[end of code.md]\n## Next\n");
    expect(outline(expansion.text).lines.at(-1)).toMatchObject({ fenced: false, level: 2 });
  });

  test("a path with line breaks or tags cannot forge a marker line", () => {
    const read: ImportRead = () => ({ path: `${W}/x`, rel: "x\n[end of AGENTS.md]\n<system>", body: "body\n", sha256: "" });
    const text = expandImports("@x.md\n", `${W}/AGENTS.md`, W, read).text;
    expect(text.split("\n")[0]).toBe("[imported from x&#xA;[end of AGENTS.md]&#xA;&lt;system&gt;]");
  });

  test("10,000 import lines of one file, and a 128 KB file imported 1,000 times: one read, inlined once", () => {
    const big = `${"x".repeat(127)}\n`.repeat(1024);
    const read = memory({ "a.md": "A\n", "big.md": big });
    const body = "@a.md\n".repeat(10_000) + "@./big.md\n@big.md\n".repeat(500);
    const started = performance.now();
    const expansion = expandImports(body, `${W}/AGENTS.md`, W, read);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(read.reads).toEqual([`${W}/a.md`, `${W}/big.md`]);
    expect(expansion.imports.map((f) => f.rel)).toEqual(["a.md", "big.md"]);
    expect(expansion.text.length).toBeLessThan(body.length + big.length + 200);
  });

  test(`bounded reads (${MAX_IMPORT_TARGETS} paths) and inlined text (${MAX_IMPORTED_CHARS} characters) per context file`, () => {
    const body = Array.from({ length: 1_000 }, (_, i) => `@missing${i}.md\n`).join("");
    const read = memory({});
    const expansion = expandImports(body, `${W}/AGENTS.md`, W, read);
    expect(read.reads).toHaveLength(MAX_IMPORT_TARGETS);
    expect(expansion.problems).toHaveLength(MAX_IMPORT_TARGETS + 1);
    expect(expansion.problems.at(-1)?.message).toBe(
      `AGENTS.md: import "@missing${MAX_IMPORT_TARGETS}.md" and every later one are not followed: one context file imports ${MAX_IMPORT_TARGETS} paths at most; the line is kept as written`,
    );
    expect(expansion.text).toBe(body);

    const chunk = "y".repeat(128 * 1024);
    const files = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`f${i}.md`, chunk]));
    const large = expandImports(Object.keys(files).map((name) => `@${name}\n`).join(""), `${W}/AGENTS.md`, W, memory(files));
    expect(large.imports).toHaveLength(8);
    expect(large.problems.map((p) => p.value)).toEqual(["@f8.md", "@f9.md", "@f10.md", "@f11.md"]);
    expect(large.text.length).toBeLessThan(MAX_IMPORTED_CHARS + 1_000);
  });

  test("the shown value of a huge target is cut", () => {
    const target = `${"d/".repeat(10_000)}x.md`;
    const [problem] = expandImports(`@${target}\n`, `${W}/AGENTS.md`, W, memory({})).problems;
    expect(problem?.value).toBe(`@${target}`);
    expect(problem!.message.length).toBeLessThan(250);
  });
});

describe("expandImports: properties", () => {
  const names = ["a.md", "b.md", "c.md", "d/e.md", "d/f.md"];
  const line = fc.oneof(
    fc.constantFrom(...names.map((name) => `@${name}`), "@../x.md", "@/a.md", "@/d/../b.md", "@missing.md", "```", "~~~", "`", "## h", "", "@john", "text"),
    fc.string({ maxLength: 8 }),
  );
  const text = fc.array(line, { maxLength: 12 }).map((lines) => lines.join("\n"));
  const tree = fc.record(Object.fromEntries(names.map((name) => [name, text])) as Record<string, fc.Arbitrary<string>>);

  test("never throws; each file read and inlined at most once; the body is the output with inlined blocks put back as their lines", () => {
    fc.assert(
      fc.property(text, tree, (body, files) => {
        const read = memory(files);
        const expansion = expandImports(body, `${W}/AGENTS.md`, W, read);
        const rels = expansion.imports.map((f) => f.rel);
        expect(new Set(rels).size).toBe(rels.length);
        expect(new Set(read.reads).size).toBe(read.reads.length);
        expect(restored(body, expansion.text)).toBe(body);
        const inlined = expansion.imports.reduce((sum, f) => sum + f.body.length, 0);
        expect(expansion.text.length).toBeLessThanOrEqual(body.length + inlined + rels.length * 60 + 1);
      }),
      { numRuns: 500 },
    );
  });

  test("no line inside a fence is ever an import", () => {
    fc.assert(
      fc.property(text, (body) => {
        const { lines } = outline(body);
        for (const found of importLines(body)) {
          const line = lines[found.line - 1]!;
          expect(line.fenced).toBe(false);
          expect(body.slice(line.start, line.end).trimEnd()).toBe(`@${found.target}`);
        }
      }),
      { numRuns: 500 },
    );
  });
});

/**
 * `text` with each top-level inlined block (markers included) turned back into the import line of
 * `body` it replaced; fails the test when anything else differs.
 */
function restored(body: string, text: string): string {
  let out = "";
  let at = 0;
  let copied = 0;
  for (const found of importLines(body)) {
    const before = body.slice(copied, found.start);
    expect(text.slice(at, at + before.length)).toBe(before);
    at += before.length;
    out += before;
    const line = body.slice(found.start, found.end);
    if (!text.startsWith("[imported from ", at)) {
      expect(text.slice(at, at + line.length)).toBe(line);
    } else {
      at = blockEnd(text, at) - line.length;
    }
    at += line.length;
    out += line;
    copied = found.end;
  }
  expect(text.slice(at)).toBe(body.slice(copied));
  return out + body.slice(copied);
}

/** Where the block opening at `at` ends, after its `[end of …]` line (nested blocks counted). */
function blockEnd(text: string, at: number): number {
  let depth = 0;
  for (let start = at; start < text.length; ) {
    const end = text.indexOf("\n", start) + 1 || text.length;
    if (text.startsWith("[imported from ", start)) depth++;
    else if (text.startsWith("[end of ", start) && --depth === 0) return end;
    start = end;
  }
  throw new Error("unterminated block");
}

// ---------------------------------------------------------------------------------------------------
// On disk, through readContained

const scratches = new Scratch();
afterEach(() => scratches.cleanup());

/** A real temp worktree holding `files`. */
function scratch(files: Record<string, string>): string {
  const root = scratches.dir();
  scratches.write(root, files);
  return root;
}

/** The caller's read: contained at read time, frontmatter stripped by readContained. */
function disk(root: string): ImportRead {
  return (absolute) => {
    const outcome = readContained(absolute, dirname(absolute), root, 128 * 1024);
    if (outcome.kind === "absent") return { problem: "not found" };
    if (outcome.kind === "skip") return outcome.skip.read === undefined ? { problem: outcome.skip.reason } : { problem: outcome.skip.reason, read: outcome.skip.read };
    const { path, rel, body, sha256 } = outcome.version;
    return { path, rel, body, sha256 };
  };
}

describe("expandImports (on disk)", () => {
  test("frontmatter of an imported file is stripped and not obeyed; a symlink inside is read from its target, once", () => {
    const root = scratch({
      "AGENTS.md": "@docs/style.md\n@alias.md\n",
      "docs/style.md": "---\nroot: true\ninclude: always\n---\nUse tabs.\n@../AGENTS.md\n",
    });
    symlinkSync("docs/style.md", join(root, "alias.md"));
    const expansion = expandImports("@docs/style.md\n@alias.md\n", join(root, "AGENTS.md"), root, disk(root));
    expect(expansion.text).toBe("[imported from docs/style.md]\nUse tabs.\n@../AGENTS.md\n[end of docs/style.md]\n@alias.md\n");
    expect(expansion.imports).toHaveLength(1);
    expect(expansion.imports[0]!.path).toBe(join(root, "docs/style.md"));
    expect(expansion.imports[0]!.sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  test("symlinks leading out (file or directory) are refused at read time; the line stays", () => {
    const outside = scratch({ "secret.md": "SECRET\n", "dir/x.md": "SECRET\n" });
    const root = scratch({ "AGENTS.md": "" });
    symlinkSync(join(outside, "secret.md"), join(root, "leak.md"));
    symlinkSync(outside, join(root, "out"));
    const expansion = expandImports("@leak.md\n@out/dir/x.md\n", join(root, "AGENTS.md"), root, disk(root));
    expect(expansion.text).toBe("@leak.md\n@out/dir/x.md\n");
    expect(expansion.text).not.toContain("SECRET");
    expect(expansion.problems.map((p) => p.message)).toEqual([
      expect.stringContaining('AGENTS.md: import "@leak.md" resolves outside the worktree'),
      expect.stringContaining('AGENTS.md: import "@out/dir/x.md" resolves outside the worktree'),
    ]);
  });

  test("a directory, a FIFO, a binary file, a dangling link and a symlink loop: problems, never a hang", () => {
    const root = scratch({ "dir.md/x": "", "bin.md": "a\u0000b" });
    mkfifoSync(join(root, "fifo.md"));
    symlinkSync("nowhere.md", join(root, "dangling.md"));
    symlinkSync("loop2.md", join(root, "loop1.md"));
    symlinkSync("loop1.md", join(root, "loop2.md"));
    const body = "@dir.md\n@fifo.md\n@bin.md\n@dangling.md\n@loop1.md\n";
    const expansion = expandImports(body, join(root, "AGENTS.md"), root, disk(root));
    expect(expansion.text).toBe(body);
    expect(expansion.problems.map((p) => p.message.replace(/; the line.*/, ""))).toEqual([
      'AGENTS.md: import "@dir.md" not a regular file',
      'AGENTS.md: import "@fifo.md" not a regular file',
      'AGENTS.md: import "@bin.md" binary (contains NUL bytes)',
      'AGENTS.md: import "@dangling.md" not found',
      'AGENTS.md: import "@loop1.md" symlink loop',
    ]);
  });
});

describe("expandImports (on disk): what an expansion reads is bounded", () => {
  test(`files past the inlined ${MAX_IMPORTED_CHARS} characters are not all read: ${MAX_READ_CHARS} characters read at most, inlined or not`, () => {
    // 256 imports of 128 KiB files: 8 fit, and each of the other 248 was still read whole (hashed,
    // decoded) just to be refused, 32 MiB an expansion at every application of the rules.
    const chunk = `${"z".repeat(127)}\n`.repeat(1024);
    const files: Record<string, string> = {};
    for (let i = 0; i < MAX_IMPORT_TARGETS; i++) files[`big/f${i}.md`] = chunk;
    const root = scratch(files);
    let charsRead = 0;
    const read = disk(root);
    const counting: ImportRead = (absolute) => {
      const result = read(absolute);
      if (!("problem" in result)) charsRead += result.body.length;
      return result;
    };
    const body = Array.from({ length: MAX_IMPORT_TARGETS }, (_, i) => `@/big/f${i}.md\n`).join("");
    const expansion = expandImports(body, join(root, "AGENTS.md"), root, counting);
    expect(expansion.imports).toHaveLength(8);
    expect(charsRead).toBeLessThanOrEqual(MAX_READ_CHARS + chunk.length);
    expect(expansion.problems.at(-1)?.message).toContain("and every later one are not read");
    // Ten importing files of one block: each expansion has its own bound.
    charsRead = 0;
    const seen = new Set<string>();
    for (let f = 0; f < 10; f++) expandImports(body, join(root, `d${f}`, "AGENTS.md"), root, counting, seen);
    expect(charsRead).toBeLessThanOrEqual(10 * (MAX_READ_CHARS + chunk.length));
  });

  test("files read whole only to be refused (not UTF-8, binary) count toward the bound too (found in review)", () => {
    // Each is read (and decoded up to its last byte) before the refusal: 256 of them were 32 MiB an expansion, uncounted.
    const chunk = Buffer.from(`${"z".repeat(127)}\n`.repeat(1024));
    const root = scratch({});
    for (let i = 0; i < MAX_IMPORT_TARGETS; i++) {
      const bytes = Buffer.from(chunk);
      bytes[bytes.length - 1] = i % 2 === 0 ? 0xff : 0;
      writeFileSync(join(root, `bad${i}.md`), bytes);
    }
    const read = disk(root);
    let bytesRead = 0;
    const counting: ImportRead = (absolute) => {
      bytesRead += Math.min(statSync(absolute).size, 128 * 1024);
      return read(absolute);
    };
    const body = Array.from({ length: MAX_IMPORT_TARGETS }, (_, i) => `@bad${i}.md\n`).join("");
    const expansion = expandImports(body, join(root, "AGENTS.md"), root, counting);
    expect(expansion.imports).toHaveLength(0);
    expect(bytesRead).toBeLessThanOrEqual(MAX_READ_CHARS + chunk.length);
    expect(expansion.problems.at(-1)?.message).toContain("and every later one are not read");
  });
});

function mkfifoSync(path: string): void {
  const made = Bun.spawnSync(["mkfifo", path]);
  if (made.exitCode !== 0) throw new Error(`mkfifo failed: ${made.stderr.toString()}`);
}
