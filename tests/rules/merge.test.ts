import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { mergeChains, outline, sectionName, type MergeFile, type Merged } from "../../plugin/rules/merge.ts";

type Mode = MergeFile["merge"];

let version = 0;
/** A file with a key of its own: the memo never answers for another test's files. */
function file(rel: string, body: string, merge: Mode = "append"): MergeFile {
  return { key: `${rel}#${++version}`, version: body, rel, body, merge };
}

/** What a file that stays ends up with (merging lists only the bodies it changed); undefined when it is dropped. */
function bodyOf(merged: Merged, f: MergeFile): string | undefined {
  return merged.dropped.has(f.key) ? undefined : (merged.bodies.get(f.key) ?? f.body);
}

/** The files that stay, by key, with what each ends up with. */
function effective(merged: Merged, files: Iterable<MergeFile>): Map<string, string> {
  const bodies = new Map<string, string>();
  for (const f of files) if (!merged.dropped.has(f.key)) bodies.set(f.key, bodyOf(merged, f)!);
  return bodies;
}

describe("outline", () => {
  test("headings and fences as the block reads them, offsets into the text itself", () => {
    const text = "# T\n  ```js\n## in fence\n  ```\n##no space\n###### six\n####### seven\n~~~~\n~~~\n# still fenced\n";
    const { lines, openFence } = outline(text);
    expect(lines.map((line) => [text.slice(line.start, line.end), line.fenced, line.level])).toEqual([
      ["# T\n", false, 1],
      ["  ```js\n", false, 0],
      ["## in fence\n", true, 0],
      ["  ```\n", true, 0],
      ["##no space\n", false, 0],
      ["###### six\n", false, 6],
      ["####### seven\n", false, 0],
      ["~~~~\n", false, 0],
      ["~~~\n", true, 0],
      ["# still fenced\n", true, 0],
    ]);
    expect(openFence).toBe("~~~~");
    expect(outline("").lines).toEqual([]);
    expect(outline("## a").lines).toEqual([{ start: 0, end: 4, fenced: false, level: 2 }]);
    expect(outline("```").openFence).toBe("```");
    expect(outline("```\n```").openFence).toBeUndefined();
  });

  test("a line longer than a unit is one line; CRLF headings count", () => {
    const long = `## ${"x".repeat(2000)}\r\nbody\r\n`;
    const { lines } = outline(long);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toEqual({ start: 0, end: 2005, fenced: false, level: 2 });
  });
});

describe("sectionName", () => {
  test("trimmed, case-insensitive, closing hashes and invisibles ignored, NFC", () => {
    const names = ["## Testing", "##   testing  ", "### TESTING ##", "## Tes\u200bting", "## testing\t#", "##\tTesting\r\n"];
    for (const heading of names) expect(sectionName(heading)).toBe("testing");
    expect(sectionName("## Cafe\u0301")).toBe(sectionName("## Café"));
    expect(sectionName("## C#")).toBe("c#");
    expect(sectionName("## unit   tests")).toBe("unit tests");
    expect(sectionName("## ##")).toBe("");
  });
});

describe("mergeChains: append", () => {
  test("every body is the very same string; nothing dropped, no notes", () => {
    const root = file("AGENTS.md", "## Testing\nroot\n");
    const pkg = file("pkg/AGENTS.md", "## Testing\npkg\n");
    const merged = mergeChains([[root, pkg]]);
    expect(bodyOf(merged, root)).toBe(root.body);
    expect(bodyOf(merged, pkg)).toBe(pkg.body);
    expect(merged.dropped.size).toBe(0);
    expect(merged.notes.size).toBe(0);
  });
});

describe("mergeChains: override", () => {
  test("drops every ancestor of a chain, names the overriding file, and the override says what it replaced", () => {
    const root = file("AGENTS.md", "root\n");
    const mid = file("packages/AGENTS.md", "mid\n");
    const api = file("packages/api/AGENTS.md", "api\n", "override");
    const merged = mergeChains([[root, mid, api]]);
    expect([...effective(merged, [root, mid, api]).keys()]).toEqual([api.key]);
    expect(merged.dropped.get(root.key)).toEqual(["packages/api/AGENTS.md"]);
    expect(merged.dropped.get(mid.key)).toEqual(["packages/api/AGENTS.md"]);
    expect(merged.notes.get(api.key)).toEqual(["overrides AGENTS.md, packages/AGENTS.md (merge: override): their text does not apply here"]);
  });

  test("an ancestor another chain needs stays, with a note saying where it does not apply", () => {
    const root = file("AGENTS.md", "root\n");
    const api = file("api/AGENTS.md", "api\n", "override");
    const web = file("web/AGENTS.md", "web\n");
    const merged = mergeChains([[root, api], [root, web]]);
    expect(bodyOf(merged, root)).toBe(root.body);
    expect(merged.dropped.size).toBe(0);
    expect(merged.notes.get(root.key)).toEqual(["overridden by api/AGENTS.md (merge: override) in api and below"]);
    expect(merged.notes.get(api.key)).toEqual(["overrides AGENTS.md (merge: override): their text does not apply here"]);
    // The chain of the root's own directory needs it as much as a sibling's.
    expect(mergeChains([[root, api], [root]]).dropped.size).toBe(0);
  });

  test("each chain's closest override is named; an override below an override drops the upper one too", () => {
    const root = file("AGENTS.md", "root\n");
    const a = file("a/AGENTS.md", "a\n", "override");
    const b = file("b/AGENTS.md", "b\n", "override");
    const deep = file("a/x/AGENTS.md", "deep\n", "override");
    const merged = mergeChains([[root, a, deep], [root, b]]);
    expect(merged.dropped.get(root.key)).toEqual(["a/AGENTS.md", "b/AGENTS.md"]);
    expect(merged.dropped.get(a.key)).toEqual(["a/x/AGENTS.md"]);
    expect([...effective(merged, [root, a, b, deep]).keys()].sort()).toEqual([b.key, deep.key].sort());
  });

  test("an override at the top of its chain overrides nothing and says nothing", () => {
    const top = file("AGENTS.md", "top\n", "override");
    const merged = mergeChains([[top]]);
    expect(bodyOf(merged, top)).toBe(top.body);
    expect(merged.notes.size).toBe(0);
  });
});

describe("mergeChains: sections", () => {
  const rootBody = "# Project\nintro\n\n## Testing\nuse jest\n\n## Style\ntabs\n";

  test("the child's section takes the parent's place after a note; preambles and other sections stay", () => {
    const root = file("AGENTS.md", rootBody);
    const api = file("packages/api/AGENTS.md", "api preamble\n## testing ##\nuse vitest\n## Deploy\nship it\n", "sections");
    const merged = mergeChains([[root, api]]);
    expect(bodyOf(merged, root)).toBe(
      "# Project\nintro\n\n[section \"testing\" from packages/api/AGENTS.md, replacing this file's]\n## testing ##\nuse vitest\n## Style\ntabs\n",
    );
    expect(bodyOf(merged, api)).toBe("api preamble\n[section \"testing\" of this file is shown in AGENTS.md, in place of that file's]\n## Deploy\nship it\n");
    expect(merged.notes.get(api.key)).toEqual([
      'section "testing" replaces the one of AGENTS.md (merge: sections)',
      'section "testing" moved to AGENTS.md, in place of its section of that name',
    ]);
    expect(merged.notes.get(root.key)).toEqual(['section "Testing" replaced by the one of packages/api/AGENTS.md (merge: sections), shown in its place']);
  });

  test("down a chain: the deepest wins, shown at the highest ancestor's place; the ones between give way to a note", () => {
    const root = file("AGENTS.md", rootBody);
    const mid = file("packages/AGENTS.md", "## Testing\nmid tests\n## Mid\nmid\n", "sections");
    const leaf = file("packages/api/AGENTS.md", "## Testing\nleaf tests\n", "sections");
    const merged = mergeChains([[root, mid, leaf]]);
    expect(bodyOf(merged, root)).toContain("[section \"Testing\" from packages/api/AGENTS.md, replacing this file's]\n## Testing\nleaf tests\n## Style");
    expect(bodyOf(merged, mid)).toBe(
      "[section \"Testing\" of this file is replaced by the one of packages/api/AGENTS.md, shown in AGENTS.md]\n## Mid\nmid\n",
    );
    expect(bodyOf(merged, leaf)).toBe("[section \"Testing\" of this file is shown in AGENTS.md, in place of that file's]\n");
    expect(merged.notes.get(leaf.key)?.[0]).toBe('section "Testing" replaces the one of AGENTS.md, packages/AGENTS.md (merge: sections)');
  });

  test("chains that disagree move nothing, yet the sections file says its section wins in its directory", () => {
    const root = file("AGENTS.md", rootBody);
    const api = file("api/AGENTS.md", "## Testing\napi tests\n", "sections");
    const web = file("web/AGENTS.md", "## Testing\nweb tests\n", "sections");
    const plain = file("docs/AGENTS.md", "docs\n");
    for (const chains of [[[root, api], [root, web]], [[root, api], [root, plain]], [[root, api], [root]]]) {
      const merged = mergeChains(chains);
      for (const f of chains.flat()) expect(bodyOf(merged, f)).toBe(f.body);
      expect(merged.notes.get(api.key)).toEqual(['section "Testing" replaces the one of AGENTS.md (merge: sections)']);
    }
  });

  test("two chains through the same sections file agree", () => {
    const root = file("AGENTS.md", rootBody);
    const api = file("api/AGENTS.md", "## Testing\napi tests\n", "sections");
    const a = file("api/a/AGENTS.md", "a\n");
    const b = file("api/b/AGENTS.md", "b\n");
    const merged = mergeChains([[root, api, a], [root, api, b]]);
    expect(bodyOf(merged, root)).toContain("api tests");
    expect(bodyOf(merged, root)).not.toContain("use jest");
  });

  test("level-1 headings never match; a heading in a fence never matches; the first of two duplicates matches", () => {
    const root = file("AGENTS.md", "# Testing\nroot title\n```\n## Style\nfenced\n```\n## Style\nfirst\n## Style\nsecond\n");
    const child = file("x/AGENTS.md", "# Testing\nchild title\n~~~\n## Style\nchild fenced\n~~~\n## style\nchild\n## Style\nchild second\n", "sections");
    const merged = mergeChains([[root, child]]);
    expect(bodyOf(merged, root)).toBe(
      "# Testing\nroot title\n```\n## Style\nfenced\n```\n[section \"style\" from x/AGENTS.md, replacing this file's]\n## style\nchild\n## Style\nsecond\n",
    );
    expect(bodyOf(merged, child)).toBe(
      "# Testing\nchild title\n~~~\n## Style\nchild fenced\n~~~\n[section \"style\" of this file is shown in AGENTS.md, in place of that file's]\n## Style\nchild second\n",
    );
  });

  test("a section runs to the next heading of its level or higher, subsections included", () => {
    const root = file("AGENTS.md", "## Testing\nold\n### Unit\nold unit\n#### Deep\nold deep\n## Style\nstyle\n");
    const child = file("x/AGENTS.md", "## Testing\nnew\n", "sections");
    const merged = mergeChains([[root, child]]);
    expect(bodyOf(merged, root)).toBe("[section \"Testing\" from x/AGENTS.md, replacing this file's]\n## Testing\nnew\n## Style\nstyle\n");
  });

  test("nested matches: a replacement overlapping one already made is not made, and its text stays", () => {
    const root = file("AGENTS.md", "## Testing\nold\n### Unit\nold unit\n## Other\nother\n");
    const child = file("x/AGENTS.md", "## Unit\nnew unit\n## Testing\nnew\n", "sections");
    const merged = mergeChains([[root, child]]);
    expect(bodyOf(merged, root)).toBe("[section \"Testing\" from x/AGENTS.md, replacing this file's]\n## Testing\nnew\n## Other\nother\n");
    expect(bodyOf(merged, child)).toBe("## Unit\nnew unit\n[section \"Testing\" of this file is shown in AGENTS.md, in place of that file's]\n");
    // The subsection inside the section on the child's side: levels do not matter, the root's first
    // section is placed first, and the child's Testing (which holds the Unit already moved) stays.
    const inner = file("y/AGENTS.md", "## Testing\nnew\n### Unit\nnew unit\n", "sections");
    const root2 = file("AGENTS.md", "## Unit\nold unit\n## Testing\nold\n");
    const merged2 = mergeChains([[root2, inner]]);
    expect(bodyOf(merged2, root2)).toBe("[section \"Unit\" from y/AGENTS.md, replacing this file's]\n### Unit\nnew unit\n## Testing\nold\n");
    expect(bodyOf(merged2, inner)).toBe("## Testing\nnew\n[section \"Unit\" of this file is shown in AGENTS.md, in place of that file's]\n");
  });

  test("a moved section that leaves a fence open is closed where it lands", () => {
    const root = file("AGENTS.md", "## Testing\nold\n## Style\nstyle\n");
    const child = file("x/AGENTS.md", "## Testing\n````sh\nnpm test\n## not a heading", "sections");
    const merged = mergeChains([[root, child]]);
    expect(bodyOf(merged, root)).toBe(
      "[section \"Testing\" from x/AGENTS.md, replacing this file's]\n## Testing\n````sh\nnpm test\n## not a heading\n````\n## Style\nstyle\n",
    );
    expect(outline(bodyOf(merged, root)!).lines.at(-2)?.level).toBe(2);
  });

  test("a dropped file neither gives nor takes a section", () => {
    const root = file("AGENTS.md", "## Testing\nroot\n");
    const child = file("x/AGENTS.md", "## Testing\nchild\n", "sections");
    const over = file("x/y/AGENTS.md", "over\n", "override");
    const merged = mergeChains([[root, child, over]]);
    expect([...effective(merged, [root, child, over]).entries()]).toEqual([[over.key, "over\n"]]);
    expect(merged.bodies.size).toBe(0);
    // The override drops only the chain through it: the root stays whole for the other chain.
    const other = file("z/AGENTS.md", "z\n");
    const merged2 = mergeChains([[root, child, over], [root, other]]);
    expect(bodyOf(merged2, root)).toBe(root.body);
  });

  test("paths with line breaks cannot break a note line", () => {
    const root = file("AGENTS.md", "## Testing\nroot\n");
    const child = file("x\n## Testing\n/AGENTS.md", "## Testing\nchild\n", "sections");
    const body = bodyOf(mergeChains([[root, child]]), root)!;
    expect(body.split("\n")[0]).toBe("[section \"Testing\" from x&#xA;## Testing&#xA;/AGENTS.md, replacing this file's]");
  });
});

describe("mergeChains: memo and cost", () => {
  test("equal inputs give the same object, whatever the chains' order; new versions are merged again", () => {
    const root = file("AGENTS.md", "## Testing\nroot\n");
    const a = file("a/AGENTS.md", "## Testing\na\n", "sections");
    const b = file("b/AGENTS.md", "b\n", "override");
    const first = mergeChains([[root, a], [root, b]]);
    expect(mergeChains([[root, b], [root, a]])).toBe(first);
    const a2 = { ...a, key: `${a.key}'`, version: "## Testing\na2\n", body: "## Testing\na2\n" };
    expect(mergeChains([[root, a2], [root, b]])).not.toBe(first);
    // The same file at a new version (its key is its path): merged again, with the new text.
    expect(bodyOf(mergeChains([[root, a]]), root)).toContain("\na\n");
    const a3 = { ...a, version: "## Testing\na3\n", body: "## Testing\na3\n" };
    expect(bodyOf(mergeChains([[root, a3]]), root)).toContain("\na3\n");
  });

  test("a file's text is read at most once a merge, however many sections it gives (found in review: once per section)", () => {
    const reads = new Map<string, number>();
    const counted = (rel: string, body: string, merge: Mode): MergeFile => ({
      key: `${rel}#${++version}`,
      version: rel,
      rel,
      get body(): string {
        reads.set(rel, (reads.get(rel) ?? 0) + 1);
        return body;
      },
      merge,
    });
    const names = Array.from({ length: 50 }, (_, i) => `## Part ${i}\n`);
    const root = counted("AGENTS.md", names.map((heading) => `${heading}root\n`).join(""), "append");
    const leaf = counted("x/AGENTS.md", names.map((heading) => `${heading}leaf\n`).join(""), "sections");
    const merged = mergeChains([[root, leaf]]);
    expect(merged.bodies.get(root.key)).toContain('[section "Part 49" from x/AGENTS.md');
    expect(Object.fromEntries(reads)).toEqual({ "AGENTS.md": 1, "x/AGENTS.md": 1 });
  });

  test("no text is read unless sections are merged (a version decodes its text at each read)", () => {
    const unread = (rel: string, merge: Mode): MergeFile => ({
      key: `${rel}#${++version}`,
      version: rel,
      rel,
      get body(): string {
        throw new Error(`${rel}: text read`);
      },
      merge,
    });
    const root = unread("AGENTS.md", "append");
    const merged = mergeChains([[root, unread("a/AGENTS.md", "override")], [root, unread("b/AGENTS.md", "append")]]);
    expect(merged.notes.get(root.key)).toHaveLength(1);
    expect(merged.bodies.size).toBe(0);
  });

  test("10,000 headings on each side, 2,000 chains, 128K empty lines: bounded time", () => {
    const names = Array.from({ length: 10_000 }, (_, i) => `## Heading ${i}\nroot text ${i}\n`).join("");
    const childNames = Array.from({ length: 10_000 }, (_, i) => `### heading ${9_999 - i}\nchild ${i}\n`).join("");
    const root = file("AGENTS.md", names + "\n".repeat(128_000));
    const child = file("x/AGENTS.md", childNames, "sections");
    let started = performance.now();
    const merged = mergeChains([[root, child]]);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(bodyOf(merged, root)).toContain("[section \"heading 0\" from x/AGENTS.md");
    expect(bodyOf(merged, root)).not.toContain("root text 17\n");
    const leaves = Array.from({ length: 2_000 }, (_, i) => file(`p${i}/AGENTS.md`, `## Heading ${i}\nleaf ${i}\n`, i % 2 === 0 ? "sections" : "override"));
    started = performance.now();
    const many = mergeChains(leaves.map((leaf) => [root, leaf]));
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(bodyOf(many, root)).toBe(root.body);
    expect(many.notes.get(root.key)).toHaveLength(1_000);
  });
});

// ---------------------------------------------------------------------------------------------------
// Properties

const NAMES = ["Testing", " testing ##", "TESTING", "Style", "Build", "Tes\u200bting"];

/** A body as blocks; every text line is unique (`L<file>.<n>`), so where each went can be told. */
type Block =
  | { kind: "text" }
  | { kind: "blank" }
  | { kind: "heading"; level: number; name: string }
  | { kind: "fence"; char: "`" | "~"; length: number; inside: string[]; closed: boolean };

const block: fc.Arbitrary<Block> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<Block>({ kind: "text" }) },
  { weight: 1, arbitrary: fc.constant<Block>({ kind: "blank" }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("heading" as const), level: fc.integer({ min: 1, max: 4 }), name: fc.constantFrom(...NAMES) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("fence" as const),
      char: fc.constantFrom("`" as const, "~" as const),
      length: fc.integer({ min: 3, max: 5 }),
      inside: fc.array(fc.constantFrom("## Fenced", "## Testing", "# Fenced", "text"), { maxLength: 3 }),
      closed: fc.boolean(),
    }),
  },
);

function render(blocks: readonly Block[], id: number): string {
  let n = 0;
  return blocks
    .map((b, index) => {
      if (b.kind === "text") return `L${id}.${n++}\n`;
      if (b.kind === "blank") return "\n";
      if (b.kind === "heading") return `${"#".repeat(b.level)} ${b.name}\n`;
      const fence = b.char.repeat(b.length);
      const inside = b.inside.map((line) => (line === "text" ? `L${id}.${n++}` : line));
      // Only the last fence may stay open: an open one earlier would be closed by the next fence.
      return [fence, ...inside, ...(b.closed || index < blocks.length - 1 ? [fence] : [])].join("\n") + "\n";
    })
    .join("");
}

/** A tree of files (each node's parent is an earlier node), and chains from the root to some nodes. */
const hierarchy = fc
  .array(fc.record({ parent: fc.nat(), merge: fc.constantFrom<Mode>("append", "append", "override", "sections", "sections"), blocks: fc.array(block, { maxLength: 10 }) }), {
    minLength: 1,
    maxLength: 7,
  })
  .chain((nodes) => fc.tuple(fc.constant(nodes), fc.uniqueArray(fc.nat({ max: nodes.length - 1 }), { minLength: 1, maxLength: 4 })))
  .map(([nodes, leaves]) => {
    const parents = nodes.map((node, i) => (i === 0 ? -1 : node.parent % i));
    const files = nodes.map((node, i): MergeFile => {
      const body = render(node.blocks, i);
      return { key: `f${i}`, version: body, rel: `d${i}/AGENTS.md`, body, merge: node.merge };
    });
    const chains = leaves.map((leaf) => {
      const chain: MergeFile[] = [];
      for (let at = leaf; at !== -1; at = parents[at]!) chain.unshift(files[at]!);
      return chain;
    });
    return chains;
  });

/** The same chains under fresh keys (so the memo cannot answer), and the map back. */
function rekeyed(chains: readonly (readonly MergeFile[])[], tag: string): MergeFile[][] {
  return chains.map((chain) => chain.map((f) => ({ ...f, key: `${f.key}@${tag}` })));
}

function normalized(merged: Merged, tag: string) {
  const strip = (key: string) => key.slice(0, key.length - tag.length - 1);
  const entries = <T>(map: ReadonlyMap<string, T>) => [...map].map(([key, value]) => [strip(key), value] as const).sort(([a], [b]) => (a < b ? -1 : 1));
  return { bodies: entries(merged.bodies), dropped: entries(merged.dropped), notes: entries(merged.notes) };
}

let run = 0;

describe("mergeChains: properties", () => {
  test("append-only chains change no body", () => {
    fc.assert(
      fc.property(hierarchy, (chains) => {
        const appended = rekeyed(chains, `a${run++}`).map((chain) => chain.map((f) => ({ ...f, merge: "append" as const })));
        const merged = mergeChains(appended);
        expect(merged.bodies.size + merged.dropped.size + merged.notes.size).toBe(0);
      }),
      { numRuns: 200 },
    );
  });

  test("no text vanishes: each line is kept once, or its file is dropped, or its section was replaced with a note", () => {
    fc.assert(
      fc.property(hierarchy, (raw) => {
        const chains = rekeyed(raw, `c${run++}`);
        const merged = mergeChains(chains);
        const files = new Map(chains.flat().map((f) => [f.key, f]));
        const output = [...effective(merged, files.values()).values()].join("\n").split("\n");
        for (const f of files.values()) {
          const lines = f.body.split("\n").filter((line) => /^L\d+\.\d+$/.test(line));
          for (const line of lines) {
            const copies = output.filter((out) => out === line).length;
            expect(copies).toBeLessThanOrEqual(1);
            if (copies === 1 || merged.dropped.has(f.key)) continue;
            // Gone: it must lie in a section of its file that a note line in that file names.
            const enclosing = enclosingSections(f.body, f.body.indexOf(`${line}\n`));
            const noted = notedSections(bodyOf(merged, f)!);
            expect(enclosing.some((name) => noted.has(name))).toBe(true);
          }
        }
        // Dropped: exactly the files every chain through which has an override below them.
        for (const f of files.values()) {
          const through = chains.filter((chain) => chain.some((g) => g.key === f.key));
          const overridden = through.every((chain) => chain.slice(chain.findIndex((g) => g.key === f.key) + 1).some((g) => g.merge === "override"));
          expect(merged.dropped.has(f.key)).toBe(overridden);
          if (overridden) expect(merged.bodies.has(f.key)).toBe(false);
        }
      }),
      { numRuns: 400 },
    );
  });

  test("deterministic and independent of the chains' order", () => {
    fc.assert(
      fc.property(hierarchy, fc.infiniteStream(fc.nat()), (chains, random) => {
        const tag1 = `o${run++}`;
        const tag2 = `o${run++}`;
        const shuffled = [...chains].map((chain) => ({ chain, order: random.next().value })).sort((a, b) => a.order - b.order).map(({ chain }) => chain);
        expect(normalized(mergeChains(rekeyed(shuffled, tag2)), tag2)).toEqual(normalized(mergeChains(rekeyed(chains, tag1)), tag1));
      }),
      { numRuns: 200 },
    );
  });

  test("no heading inside a fence ever matches", () => {
    fc.assert(
      fc.property(hierarchy, (raw) => {
        const chains = rekeyed(raw, `f${run++}`);
        const merged = mergeChains(chains);
        const bodies = [...effective(merged, chains.flat()).values()];
        const said = [...bodies, ...[...merged.notes.values()].flat()].join("\n");
        // "Fenced" only ever heads a line inside a fence.
        expect(said).not.toMatch(/section "Fenced"/i);
        // And every fenced line still reads as fenced where it ended up.
        for (const body of bodies) {
          const { lines } = outline(body);
          for (const line of lines) if (body.slice(line.start, line.end).startsWith("## Fenced")) expect(line.fenced).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });
});

/** The names of the sections (level 2+, outside fences) that hold offset `at`, outermost first. */
function enclosingSections(body: string, at: number): string[] {
  const open: { level: number; name: string }[] = [];
  for (const line of outline(body).lines) {
    if (line.start > at) break;
    if (line.level === 0) continue;
    while (open.length > 0 && open.at(-1)!.level >= line.level) open.pop();
    if (line.level >= 2) open.push({ level: line.level, name: sectionName(body.slice(line.start, line.end)) });
  }
  return open.map(({ name }) => name);
}

/** Sections a body's note lines say were replaced in it. */
function notedSections(body: string): Set<string> {
  const notes = body.matchAll(/^\[section "(.*)" (?:from .*, replacing this file's|of this file is replaced by the one of .*)\]$/gm);
  return new Set([...notes].map((match) => sectionName(`## ${match[1]}`)));
}
