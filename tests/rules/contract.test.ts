import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import picomatch from "picomatch";
import { KNOWN_KEYS, parseFrontmatter } from "../../plugin/files/frontmatter.ts";
import {
  type Contract,
  DEFAULT_CONTRACT,
  MAX_DESCRIPTION_CHARS,
  MAX_GLOB_CHARS,
  MAX_LIST_ITEMS,
  appliesToAgent,
  describeProblem,
  matchesPaths,
  matchesWatch,
  readContract,
} from "../../plugin/rules/contract.ts";

/** A fresh frontmatter object each time, as parseFrontmatter gives one per file version. */
const read = (frontmatter: Record<string, unknown>): Contract => readContract(Object.freeze({ ...frontmatter }));
/** Through the real parser, so values are exactly what YAML gives. */
const fromYaml = (yaml: string): { frontmatter: Readonly<Record<string, unknown>>; contract: Contract } => {
  const parsed = parseFrontmatter(`---\n${yaml}\n---\nbody\n`);
  if (parsed.error !== undefined) throw new Error(parsed.error);
  return { frontmatter: parsed.frontmatter, contract: readContract(parsed.frontmatter) };
};
const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/u;
const LINE_BREAK = /[\n\v\f\r\x85\u2028\u2029]/;
const timed = <T>(run: () => T): { result: T; ms: number } => {
  const start = performance.now();
  const result = run();
  return { result, ms: performance.now() - start };
};
const fields = (contract: Contract) => {
  const { problems: _problems, unknownKeys: _unknown, ...rest } = contract;
  return rest;
};

describe("contract: defaults and valid values", () => {
  test("no frontmatter is the frozen default", () => {
    expect(readContract({})).toEqual(DEFAULT_CONTRACT);
    // The very object: a hierarchy of files without frontmatter is told plain by identity (apply.ts).
    expect(readContract({})).toBe(DEFAULT_CONTRACT);
    expect(Object.isFrozen(DEFAULT_CONTRACT)).toBe(true);
    for (const list of [DEFAULT_CONTRACT.excludeAgents, DEFAULT_CONTRACT.watch, DEFAULT_CONTRACT.unknownKeys, DEFAULT_CONTRACT.problems]) expect(Object.isFrozen(list)).toBe(true);
    expect(DEFAULT_CONTRACT).toMatchObject({ include: "touched", priority: "normal", merge: "append", paths: undefined, agents: undefined });
  });

  test("each key, each valid value", () => {
    const cases: [Record<string, unknown>, Partial<Contract>][] = [
      [{ include: "touched" }, { include: "touched" }],
      [{ include: "always" }, { include: "always" }],
      [{ include: "manual" }, { include: "manual" }],
      [{ include: "agent", description: "SQL migrations" }, { include: "agent", description: "SQL migrations" }],
      [{ include: " always " }, { include: "always" }],
      [{ description: "  Payments API rules  " }, { description: "Payments API rules" }],
      [{ paths: "**/*.sql" }, { paths: ["**/*.sql"] }],
      [{ paths: ["**/*.sql", " db/** "] }, { paths: ["**/*.sql", "db/**"] }],
      [{ paths: "a.ts, b.ts," }, { paths: ["a.ts", "b.ts"] }],
      [{ paths: "**/*.{ts,tsx},src/[a,b]/*" }, { paths: ["**/*.{ts,tsx}", "src/[a,b]/*"] }],
      [{ agents: "build" }, { agents: ["build"] }],
      [{ agents: [" build ", "plan"] }, { agents: ["build", "plan"] }],
      [{ agents: "build, review" }, { agents: ["build", "review"] }],
      [{ exclude_agents: "plan" }, { excludeAgents: ["plan"] }],
      [{ exclude_agents: ["plan", "title"] }, { excludeAgents: ["plan", "title"] }],
      ...(["critical", "high", "normal", "low"] as const).map((priority): [Record<string, unknown>, Partial<Contract>] => [{ priority }, { priority }]),
      ...(["append", "override", "sections"] as const).map((merge): [Record<string, unknown>, Partial<Contract>] => [{ merge }, { merge }]),
      [{ watch: "packages/*/AGENTS.md" }, { watch: ["packages/*/AGENTS.md"] }],
      [{ watch: ["a/**", "!a/tmp/**"] }, { watch: ["a/**", "!a/tmp/**"] }],
    ];
    for (const [frontmatter, expected] of cases) {
      const contract = read(frontmatter);
      expect({ frontmatter, problems: contract.problems }).toEqual({ frontmatter, problems: [] });
      expect(contract).toMatchObject(expected);
    }
  });

  test("an empty value is no value, silently (Cursor's template leaves keys empty)", () => {
    const { contract } = fromYaml('description:\nglobs:\ninclude:\npaths: []\nagents: "  "\nwatch: ""\npriority: ~');
    expect(contract.problems).toEqual([]);
    expect(fields(contract)).toEqual(fields(DEFAULT_CONTRACT));
  });

  test("every known key is handled: none listed as unknown, root ignored here whatever its value", () => {
    const contract = read(Object.fromEntries([...KNOWN_KEYS].map((key) => [key, null])));
    expect(contract.unknownKeys).toEqual([]);
    expect(read({ root: "junk", owner: "team-db", Include: "always" })).toMatchObject({ problems: [], unknownKeys: ["owner", "Include"], include: "touched" });
  });

  test("contracts are frozen and memoized per frontmatter object", () => {
    const frontmatter = Object.freeze({ include: "always", agents: ["build"] });
    const contract = readContract(frontmatter);
    expect(readContract(frontmatter)).toBe(contract);
    // Its arrays are typed readonly, not frozen (a frozen array is a slow hash map in JavaScriptCore; see FileStore.walkOf).
    expect(Object.isFrozen(contract) && contract.problems.every((problem) => Object.isFrozen(problem))).toBe(true);
    expect(() => {
      (contract as { include: string }).include = "manual";
    }).toThrow();
  });
});

describe("contract: bad values give one problem naming the key and the value; the key acts absent", () => {
  const tooMany = Array.from({ length: MAX_LIST_ITEMS + 1 }, (_, i) => `a${i}`);
  const cases: [key: string, value: unknown, message: string][] = [
    ["include", "sometimes", 'unknown mode "sometimes" (touched, always, manual, agent)'],
    ["include", "Always", 'unknown mode "Always"'],
    ["include", 3, "expects one of touched, always, manual, agent, got 3"],
    ["include", true, "got true"],
    ["include", ["always"], 'got ["always"]'],
    ["include", { mode: "always" }, 'got {"mode": "always"}'],
    ["include", new Date("2024-01-01"), "got 2024-01-01T00:00:00.000Z"],
    ["description", 42, "expects one line of text, got 42"],
    ["description", ["a", "b"], 'got ["a", "b"]'],
    ["description", false, "got false"],
    ["paths", 5, "expects a string or a list of strings, got 5"],
    ["paths", { "*.ts": true }, 'got {"*.ts": true}'],
    ["paths", [1], "item 1 is 1, not a string"],
    ["paths", ["a", null], "item 2 is null, not a string"],
    ["paths", [["a"]], 'item 1 is ["a"], not a string'],
    ["paths", ["a", "  "], "item 2 is blank"],
    ["paths", tooMany, `has ${MAX_LIST_ITEMS + 1} items, more than ${MAX_LIST_ITEMS}`],
    ["paths", tooMany.join(","), `has more than ${MAX_LIST_ITEMS} items`],
    ["paths", "[", 'glob "[" does not parse: [ is never closed'],
    ["paths", "{a,", 'glob "{a," does not parse: { is never closed'],
    ["paths", "**/*.{ts", "{ is never closed"],
    ["paths", "a]", "] without ["],
    ["paths", "a}", "} without {"],
    ["paths", "{a}", "{…} without a comma"],
    ["paths", "{}", "{…} without a comma"],
    ["paths", "(a|b)", "( ) groups and extglobs are not supported"],
    ["paths", "!(a)", "( ) groups and extglobs are not supported"],
    ["paths", "@(a|b).ts", "extglobs"],
    ["paths", "+(a).ts", "extglobs"],
    ["paths", "[[:alpha:]].ts", "POSIX classes"],
    ["paths", "[z-a].ts", "the range z-a is empty"],
    ["paths", "a\\", "lone \\"],
    ["paths", "[a/b]", "[ is never closed"],
    ["paths", "!", "is empty"],
    ["paths", "/src/*.ts", "starts with /: globs are relative to this file's directory"],
    ["paths", "../shared/*.sql", "has a .. segment: it could only point outside this file's directory"],
    ["paths", "a/../../b", "has a .. segment"],
    ["paths", "{a,..}/x", "has a .. segment"],
    ["paths", "a//b", "has an empty or . segment"],
    ["paths", "src/", "has an empty or . segment"],
    ["paths", "a/./b", "has an empty or . segment"],
    ["paths", "{a,b}".repeat(12), `expands past ${MAX_GLOB_CHARS} characters`],
    ["paths", "x".repeat(MAX_GLOB_CHARS + 1), `makes the list longer than ${MAX_GLOB_CHARS} characters`],
    ["globs", "[", "[ is never closed"],
    ["applyTo", "../x", "has a .. segment"],
    ["agents", 3, "expects a string or a list of strings, got 3"],
    ["agents", [3], "item 1 is 3, not a string"],
    ["agents", [""], "item 1 is blank"],
    ["agents", tooMany, "more than"],
    ["apply_to", { build: 1 }, "expects a string or a list of strings"],
    ["exclude_agents", [true], "item 1 is true, not a string"],
    ["exclude_agents", 1.5, "got 1.5"],
    ["priority", "urgent", 'unknown priority "urgent" (critical, high, normal, low)'],
    ["priority", 1, "expects one of critical, high, normal, low, got 1"],
    ["merge", "replace", 'unknown merge mode "replace" (append, override, sections)'],
    ["merge", false, "got false"],
    ["watch", "/etc/passwd", "starts with /: globs are relative to the worktree"],
    ["watch", "../other/AGENTS.md", "it could only point outside the worktree"],
    ["watch", "packages/[", "[ is never closed"],
    ["watch", 7, "expects a string or a list of strings, got 7"],
    ["alwaysApply", "true", 'expects true or false, got "true"'],
    ["alwaysApply", 1, "expects true or false, got 1"],
  ];

  test.each(cases)("%s: %p", (key, value, message) => {
    const contract = read({ [key]: value });
    expect(contract.problems).toHaveLength(1);
    const [problem] = contract.problems;
    expect(problem?.key).toBe(key);
    expect(problem?.value).toBe(value);
    expect(problem?.message).toContain(message);
    expect(problem?.message).toEndWith("; ignored");
    expect(fields(contract)).toEqual(fields(DEFAULT_CONTRACT));
    expect(describeProblem("AGENTS.md", problem!)).toStartWith(`AGENTS.md: frontmatter "${key}": `);
  });

  test("the log line reads as the issue shows it", () => {
    const [problem] = read({ include: "sometimes" }).problems;
    expect(describeProblem("AGENTS.md", problem!)).toBe('AGENTS.md: frontmatter "include": unknown mode "sometimes" (touched, always, manual, agent); ignored');
  });

  test("a bad glob among good ones: the whole key acts absent (one problem, the first bad glob named)", () => {
    const contract = read({ paths: ["**/*.sql", "[", "{a,"] });
    expect(contract.paths).toBeUndefined();
    expect(contract.problems.map((problem) => problem.message)).toEqual(['glob "[" does not parse: [ is never closed (write \\[ for a literal [); ignored']);
    expect(matchesPaths(contract, "any/file.ts")).toBe(true);
  });

  test("include: agent without a description is a problem, but the mode stays agent", () => {
    for (const description of [undefined, "", 42]) {
      const contract = read(description === undefined ? { include: "agent" } : { include: "agent", description });
      expect(contract.include).toBe("agent");
      expect(contract.problems.find((problem) => problem.key === "include")?.message).toBe('"agent" without a "description": it ranks on the text alone');
    }
  });

  test("paths on a mode other than touched is ignored with a problem", () => {
    for (const include of ["always", "manual", "agent"]) {
      const contract = read({ include, description: "d", paths: "**/*.sql" });
      expect(contract).toMatchObject({ include, paths: undefined });
      expect(contract.problems).toEqual([{ key: "paths", value: "**/*.sql", message: `"**/*.sql" applies only to include: touched (this file is ${include}); ignored` }]);
    }
  });

  test("a multi-line or long description keeps its first line, cut, with one problem", () => {
    expect(fromYaml("description: |\n  First line.\n  Second line.").contract).toMatchObject({
      description: "First line.",
      problems: [{ key: "description", message: "is not one short line: only the first of its lines is kept" }],
    });
    expect(fromYaml("description: >\n  folded\n  into one\n").contract).toMatchObject({ description: "folded into one", problems: [] });
    const long = read({ description: `\n\n${"word ".repeat(200)}\nmore` });
    expect(long.description).toHaveLength(MAX_DESCRIPTION_CHARS);
    expect(long.description).toEndWith("…");
    expect(long.problems[0]?.message).toBe(`is not one short line: only the first of its lines is kept, cut to ${MAX_DESCRIPTION_CHARS} characters`);
    expect(read({ description: "a\u2028b\x85c" }).description).toBe("a");
  });
});

describe("contract: peers' aliases and precedence", () => {
  test("aliases: apply_to = agents, globs and applyTo = paths, alwaysApply: true = always", () => {
    expect(read({ apply_to: "build" })).toMatchObject({ agents: ["build"], problems: [] });
    expect(read({ globs: "**/*.ts, **/*.tsx" })).toMatchObject({ paths: ["**/*.ts", "**/*.tsx"], problems: [] });
    expect(read({ globs: ["src/**"] })).toMatchObject({ paths: ["src/**"], problems: [] });
    expect(read({ applyTo: "**/*.py,docs/**/*.md" })).toMatchObject({ paths: ["**/*.py", "docs/**/*.md"], problems: [] });
    expect(read({ alwaysApply: true })).toMatchObject({ include: "always", problems: [] });
  });

  test("Cursor's rule types: Always, Auto Attached, Agent Requested, Manual", () => {
    expect(fromYaml("alwaysApply: true\nglobs:\ndescription:").contract).toMatchObject({ include: "always", problems: [] });
    expect(fromYaml("alwaysApply: false\nglobs: '*.sql'\ndescription:").contract).toMatchObject({ include: "touched", paths: ["*.sql"], problems: [] });
    expect(fromYaml("alwaysApply: false\nglobs: '*.sql'\ndescription: SQL").contract).toMatchObject({ include: "touched", description: "SQL", problems: [] });
    expect(fromYaml("alwaysApply: false\nglobs:\ndescription: Use for SQL").contract).toMatchObject({ include: "agent", problems: [] });
    expect(fromYaml("alwaysApply: false\nglobs:\ndescription:").contract).toMatchObject({ include: "manual", problems: [] });
    expect(read({ alwaysApply: true, globs: "*.ts" })).toMatchObject({ include: "always", paths: undefined, problems: [{ key: "globs" }] });
  });

  test("the key wins over its alias, the alias is reported as ignored", () => {
    expect(read({ agents: "build", apply_to: "plan" })).toMatchObject({ agents: ["build"], problems: [{ key: "apply_to", value: "plan", message: 'ignored: "agents" is given' }] });
    expect(read({ paths: "a/**", globs: "b/**", applyTo: "c/**" }).problems).toEqual([
      { key: "globs", value: "b/**", message: 'ignored: "paths" is given' },
      { key: "applyTo", value: "c/**", message: 'ignored: "paths" is given' },
    ]);
    expect(read({ globs: "b/**", applyTo: "c/**" })).toMatchObject({ paths: ["b/**"], problems: [{ key: "applyTo", message: 'ignored: "globs" is given' }] });
    expect(read({ include: "manual", alwaysApply: true })).toMatchObject({ include: "manual", problems: [{ key: "alwaysApply", message: 'ignored: "include" is given' }] });
  });

  test("a bad key is as if absent, so its alias applies", () => {
    expect(read({ agents: 3, apply_to: "plan" })).toMatchObject({ agents: ["plan"], problems: [{ key: "agents" }] });
    expect(read({ paths: "[", globs: "*.sql" })).toMatchObject({ paths: ["*.sql"], problems: [{ key: "paths" }] });
    expect(read({ include: "sometimes", alwaysApply: true })).toMatchObject({ include: "always", problems: [{ key: "include" }] });
  });
});

describe("contract: attacker values", () => {
  test("prototype keys are own unknown keys and never read Object.prototype", () => {
    const frontmatter = JSON.parse('{"__proto__": {"include": "always"}, "constructor": "x", "toString": 1, "include": "manual"}') as Record<string, unknown>;
    const contract = readContract(frontmatter);
    expect(contract).toMatchObject({ include: "manual", unknownKeys: ["__proto__", "constructor", "toString"], problems: [] });
    expect(readContract(Object.create({ include: "always", agents: ["x"] }) as Record<string, unknown>)).toEqual(DEFAULT_CONTRACT);
    const yaml = fromYaml("__proto__: {include: always}\nconstructor: {}\nhasOwnProperty: 1\ninclude: manual");
    expect(yaml.contract).toMatchObject({ include: "manual", unknownKeys: ["__proto__", "constructor", "hasOwnProperty"] });
    expect(({} as Record<string, unknown>).include).toBeUndefined();
  });

  test("a list string of 120,000 unclosed [ is split in linear time", () => {
    // Each [ looked for its ] to the end of the string again: 10.8 s for 100,000 of them.
    const contract = read({ include: "always", agents: "[".repeat(120_000), paths: `a/${"[".repeat(120_000)}/b, c` });
    expect(contract.agents).toEqual(["[".repeat(120_000)]);
    expect(contract.problems.map((problem) => problem.key)).toEqual(["paths"]);
  }, 2_000);

  test("a contract names at most 10 unknown keys, each cut to 80 characters: a file can hold thousands, each as long as the file", () => {
    const frontmatter: Record<string, unknown> = { include: "always" };
    for (let i = 0; i < 12_000; i++) frontmatter[`${i}${"k".repeat(i % 2 === 0 ? 100_000 : 3)}`] = 1;
    const { unknownKeys } = read(frontmatter);
    expect(unknownKeys).toHaveLength(10);
    expect(Math.max(...unknownKeys.map((key) => key.length))).toBe(80);
    expect(unknownKeys[1]).toBe("1kkk");
  });

  test("prototype names as values: bad modes, plain agent names", () => {
    for (const key of ["include", "priority", "merge"]) expect(read({ [key]: "__proto__" }).problems).toHaveLength(1);
    expect(read({ include: "constructor" }).include).toBe("touched");
    const contract = read({ agents: ["constructor", "__proto__"], exclude_agents: "toString" });
    expect(contract.problems).toEqual([]);
    expect(appliesToAgent(contract, "constructor")).toBe(true);
    expect(appliesToAgent(contract, "toString")).toBe(false);
    expect(appliesToAgent(contract, "hasOwnProperty")).toBe(false);
    expect(appliesToAgent(DEFAULT_CONTRACT, "constructor")).toBe(true);
  });

  test("YAML-typed values: numbers, dates, null, binary, NaN, sets, nested maps, cyclic aliases", () => {
    const { contract } = fromYaml(
      "include: 2024-01-01\ndescription: 0x1F\npaths: !!binary aGVsbG8=\nagents: [build, 3, null]\npriority: .nan\nmerge: !!set {a, b}\nwatch: &w [*w]\nexclude_agents: {a: {b: {c: 1}}}",
    );
    expect(fields(contract)).toEqual(fields(DEFAULT_CONTRACT));
    expect(contract.problems.map((problem) => [problem.key, problem.message])).toEqual([
      ["description", "expects one line of text, got 31; ignored"],
      ["paths", "expects a string or a list of strings, got <5 bytes>; ignored"],
      ["include", "expects one of touched, always, manual, agent, got 2024-01-01T00:00:00.000Z; ignored"],
      ["agents", "item 2 is 3, not a string; ignored"],
      ["exclude_agents", 'expects a string or a list of strings, got {"a": {"b": {"c": 1}}}; ignored'],
      ["priority", "expects one of critical, high, normal, low, got NaN; ignored"],
      ["merge", 'expects one of append, override, sections, got {"a": null, "b": null}; ignored'],
      ["watch", `item 1 is ${"[".repeat(79)}…, not a string; ignored`],
    ]);
  });

  test("an exponential alias bomb is shown in bounded time", () => {
    // 62 aliases (a block with more than 64 is not parsed at all, see frontmatter.ts): 2^30 values as JSON.
    const lines = ["a0: &a0 [x, x]"];
    for (let i = 1; i <= 29; i++) lines.push(`a${i}: &a${i} [*a${i - 1}, *a${i - 1}]`);
    const yaml = [...lines, "description: *a29", "include: *a29"].join("\n");
    const { result, ms } = timed(() => fromYaml(yaml).contract);
    expect(result.problems.map((problem) => problem.key)).toEqual(["description", "include"]);
    expect(ms).toBeLessThan(1000);
  });

  test("hostile text in values and paths reaches the log line escaped, one line, cut", () => {
    const value = `\x1b]0;pwned\x07\x1b[2J\r\n\u202eevil\u2028\u200b${"x".repeat(10_000)}`;
    const [problem] = read({ include: value }).problems;
    const line = describeProblem("dir/\x1b[31mAGENTS\n.md\u202e", problem!);
    expect(UNSAFE.test(line)).toBe(false);
    expect(line).toContain("dir/\\u{1b}[31mAGENTS\\u{a}.md\\u{202e}");
    expect(line.length).toBeLessThan(300);
  });

  test("huge inputs cost bounded time", () => {
    const checks: [string, () => Contract, string][] = [
      ["10,000 globs", () => read({ paths: Array.from({ length: 10_000 }, (_, i) => `**/${i}/*.ts`) }), "items, more than"],
      ["a 1 MB comma list", () => read({ globs: "**/*.ts,".repeat(125_000) }), "more than"],
      ["a brace bomb", () => read({ paths: "{a,b,c,d}".repeat(40) }), "expands past"],
      ["nested braces", () => read({ paths: `${"{a,".repeat(400)}b${"}".repeat(400)}` }), "expands past"],
      ["deeply nested braces", () => read({ paths: `${"{".repeat(1000)}a,b${"}".repeat(1000)}` }), "without a comma"],
      ["a 10 MB description", () => read({ include: "x".repeat(10_000_000) }), "unknown mode"],
    ];
    for (const [name, run, message] of checks) {
      const { result, ms } = timed(run);
      expect({ name, message: result.problems[0]?.message.includes(message) }).toEqual({ name, message: true });
      expect({ name, fast: ms < 2000 }).toEqual({ name, fast: true });
    }
    expect(read({ description: `${"y".repeat(10_000_000)}\nz` }).description).toHaveLength(MAX_DESCRIPTION_CHARS);
  });

  test("a brace bomb of empty alternatives is refused in bounded time: each alternative counts, even an empty one", () => {
    // 22 `{,}` are 66 characters and 4 million empty variants (each doubling cost nothing); 40 would be 10^12.
    for (const glob of ["{,}".repeat(22), `src/${"{,}".repeat(22)}`, `${"{,}".repeat(22)}/*.ts`, "{,,,,,,,}".repeat(8)]) {
      const { result, ms } = timed(() => read({ paths: glob }));
      expect({ glob, message: result.problems[0]?.message }).toEqual({ glob, message: expect.stringContaining(`expands past ${MAX_GLOB_CHARS} characters`) });
      expect({ glob, fast: ms < 100 }).toEqual({ glob, fast: true });
    }
    // Through the real parser: the fast path reads the quoted string as it is.
    expect(fromYaml(`paths: "${"{,}".repeat(22)}"`).contract.problems[0]?.message).toContain("expands past");
  });
});

describe("contract: glob matching", () => {
  const cases: [globs: string | string[], path: string, expected: boolean][] = [
    ["*.sql", "a.sql", true],
    ["*.sql", "db/a.sql", false],
    ["**/*.sql", "a.sql", true],
    ["**/*.sql", "db/x/y/a.sql", true],
    ["**/*.sql", ".github/.a.sql", true],
    ["**/*.sql", "a.sqlx", false],
    ["src/**", "src", true],
    ["src/**", "src/a/b.ts", true],
    ["src/**", "srcx/a", false],
    ["src/**/test/*.ts", "src/test/a.ts", true],
    ["src/**/test/*.ts", "src/a/b/test/a.ts", true],
    ["src/**/test/*.ts", "src/a/b/test/x/a.ts", false],
    ["a**b", "axxb", true],
    ["a**b", "ax/xb", false],
    ["*.{ts,tsx}", "a.tsx", true],
    ["*.{ts,tsx}", "a.t", false],
    ["{src,lib}/**/*.{ts,js}", "lib/x/y.js", true],
    ["a{,.local}.md", "a.local.md", true],
    ["a{b,c{d,e}}", "ace", true],
    ["a{b,c{d,e}}", "ad", false],
    ["[abc].md", "b.md", true],
    ["[abc].md", "d.md", false],
    ["[!abc].md", "d.md", true],
    ["[^abc].md", "a.md", false],
    ["[a-c0-9].md", "7.md", true],
    ["[]x].md", "].md", true],
    ["[a-].md", "-.md", true],
    ["[\\]].md", "].md", true],
    ["?.md", "é.md", true],
    ["?.md", "😀.md", true],
    ["??.md", "😀.md", false],
    ["[😀-😂].md", "😁.md", true],
    ["é/*.md", "e\u0301/a.md", true],
    ["e\u0301/*.md", "é/a.md", true],
    ["\\*.md", "*.md", true],
    ["\\*.md", "a.md", false],
    [["a\\{b,c\\}"], "a{b,c}", true],
    ["a\\{b\\,c\\}", "a{b,c}", true],
    ["./src/*.ts", "src/a.ts", true],
    ["!**/*.test.ts", "a.ts", true],
    ["!**/*.test.ts", "x/a.test.ts", false],
    [["**/*.ts", "!**/*.test.ts"], "a.md", false],
    [["**/*.ts", "!**/*.test.ts"], "x/a.test.ts", false],
    [["**/*.ts", "!**/*.test.ts"], "x/a.ts", true],
    ["!!a", "a", true],
    ["!!a", "b", false],
    ["A.md", "a.md", false],
    ["**", "../a", false],
    ["**", "..", false],
    ["**", "/abs/a", false],
    ["**", "a/../b", false],
    ["**", "a//b", false],
    ["**", "./a", false],
    ["**", "a/", false],
    ["**", "", false],
    ["**", `${"a/".repeat(2100)}b`, false],
  ];

  test.each(cases)("%p ~ %p = %p", (globs, path, expected) => {
    const contract = read({ paths: globs });
    expect(contract.problems).toEqual([]);
    expect(matchesPaths(contract, path)).toBe(expected);
    expect(matchesWatch(read({ watch: globs }), path)).toBe(expected);
  });

  test("no paths: every path inside the directory, none outside; no watch: nothing", () => {
    for (const path of ["", "a", "a/b/c.ts", `${"a/".repeat(3000)}b`]) expect(matchesPaths(DEFAULT_CONTRACT, path)).toBe(true);
    for (const path of ["..", "../a", "a/../../b", "/etc/passwd"]) expect(matchesPaths(DEFAULT_CONTRACT, path)).toBe(false);
    expect(matchesWatch(DEFAULT_CONTRACT, "a")).toBe(false);
  });

  test("a contract built by hand is compiled on first use", () => {
    const contract: Contract = { ...DEFAULT_CONTRACT, paths: ["*.sql"], watch: ["x/**"] };
    expect(matchesPaths(contract, "a.sql")).toBe(true);
    expect(matchesWatch(contract, "x/y")).toBe(true);
    expect(matchesWatch(contract, "y")).toBe(false);
  });

  /**
   * picomatch (strict, dot), except for one of its inconsistencies: a trailing `/**` matches the
   * directory itself after a literal segment (`src/**` ~ `src`) but not after a wildcard one
   * (`*\/**` !~ `a`). Here it always does.
   */
  const referenceMatcher = (glob: string): ((path: string) => boolean) => {
    const negated = glob.startsWith("!");
    const body = negated ? glob.slice(1) : glob;
    const variants = [body];
    while (variants.at(-1)!.endsWith("/**")) variants.push(variants.at(-1)!.slice(0, -3));
    const matchers = variants.map((variant) => picomatch(variant, { dot: true, strictBrackets: true }));
    return (path) => matchers.some((matcher) => matcher(path)) !== negated;
  };

  test("agrees with picomatch (strict, dot) on the syntax both accept", () => {
    const atom = fc.constantFrom("a", "b", "*", "**", "?", "{a,b}", "a{,b}", "{,a}b", "a*", "*b", "[ab]", "[a-b]", "[^a]", "\\*", ".a", "a{b,*}", "*.*");
    const glob = fc.tuple(fc.boolean(), fc.array(atom, { minLength: 1, maxLength: 4 })).map(([negated, segments]) => `${negated ? "!" : ""}${segments.join("/")}`);
    const segment = fc.constantFrom("a", "b", "ab", "ba", "aa", ".a", "a.b", "*", "b.a");
    const path = fc.array(segment, { minLength: 1, maxLength: 5 }).map((segments) => segments.join("/"));
    fc.assert(
      fc.property(glob, fc.array(path, { minLength: 1, maxLength: 6 }), (text, paths) => {
        const contract = read({ paths: text });
        expect(contract.problems).toEqual([]);
        const reference = referenceMatcher(text);
        for (const candidate of paths) expect({ text, candidate, matches: matchesPaths(contract, candidate) }).toEqual({ text, candidate, matches: reference(candidate) });
      }),
      { numRuns: 2000 },
    );
  });

  test("globs that make picomatch backtrack for seconds match here in bounded time", () => {
    const name = "a".repeat(255);
    const deep = `${"a/".repeat(2047)}a`;
    const worst: [string[], string][] = [
      [["*a*a*a*a*a*a*a*a*b"], name],
      [["**/?*?*?*?*b"], `x/${"a".repeat(1020)}`],
      [["**/a/**/a/**/a/**/b"], deep],
      [["*{a,aa}*/*a*/*{a,aa}*/*b/b/?*/b"], `${name}/${name}/${name}/${name}`],
      [[`*${"a".repeat(1000)}b`], "a".repeat(4096)],
      [[`**/${"a/".repeat(1000)}b`], deep],
      [Array.from({ length: MAX_LIST_ITEMS }, () => `*${"a".repeat(MAX_GLOB_CHARS / MAX_LIST_ITEMS - 3)}b`), "a".repeat(4096)],
      [[`*${"[a-z]".repeat(400)}b`], "a".repeat(4096)],
    ];
    for (const [globs, path] of worst) {
      const contract = read({ paths: globs });
      expect(contract.problems).toEqual([]);
      const { result, ms } = timed(() => matchesPaths(contract, path));
      expect({ glob: globs[0]!.slice(0, 40), result, fast: ms < 500 }).toEqual({ glob: globs[0]!.slice(0, 40), result: false, fast: true });
    }
  });
});

describe("contract: agents", () => {
  test("agents restrict, exclude_agents exclude, exclusion wins, names match exactly", () => {
    const both = read({ agents: ["build", "review"], exclude_agents: ["review"] });
    expect([appliesToAgent(both, "build"), appliesToAgent(both, "review"), appliesToAgent(both, "plan")]).toEqual([true, false, false]);
    const only = read({ exclude_agents: "plan" });
    expect([appliesToAgent(only, "build"), appliesToAgent(only, "plan"), appliesToAgent(only, "Plan")]).toEqual([true, false, true]);
    expect(appliesToAgent(read({ agents: "build" }), "Build")).toBe(false);
  });
});

describe("contract: properties", () => {
  const hostileText = fc.constantFrom("[", "{a,", "**/*.{ts", "../x", "/abs", "a//b", "\\", "!(a)", "{a,b}".repeat(20), "\x1b[2J", "\u202e", "\ud800", "😀", "é", "a\nb", "");
  const text = fc.oneof(hostileText, fc.string({ maxLength: 20 }), fc.constantFrom("touched", "always", "manual", "agent", "critical", "append", "build"));
  const value = fc.oneof(
    text,
    fc.array(text, { maxLength: 5 }),
    fc.array(fc.anything(), { maxLength: 3 }),
    fc.anything(),
    fc.boolean(),
    fc.date({ noInvalidDate: false }),
    fc.constant(null),
    fc.constant(Array.from({ length: 100 }, () => "a")),
  );
  const key = fc.oneof(fc.constantFrom(...KNOWN_KEYS, "__proto__", "constructor", "toString", "valueOf"), fc.string({ maxLength: 8 }));
  const frontmatter = fc.array(fc.tuple(key, value), { maxLength: 10 }).map((entries) => Object.fromEntries(entries) as Record<string, unknown>);

  test("readContract never throws; each problem names a key that was present, at most once; fields are well-formed; log lines are safe", () => {
    fc.assert(
      fc.property(frontmatter, fc.string({ unit: "binary", maxLength: 30 }), (raw, rel) => {
        const contract = readContract(raw);
        const keys = contract.problems.map((problem) => problem.key);
        for (const problemKey of keys) expect(Object.hasOwn(raw, problemKey)).toBe(true);
        expect(new Set(keys).size).toBe(keys.length);
        expect(["touched", "always", "manual", "agent"]).toContain(contract.include);
        expect(["critical", "high", "normal", "low"]).toContain(contract.priority);
        expect(["append", "override", "sections"]).toContain(contract.merge);
        for (const list of [contract.paths ?? [], contract.agents ?? [], contract.excludeAgents, contract.watch]) {
          expect(list.length).toBeLessThanOrEqual(MAX_LIST_ITEMS);
          for (const item of list) expect(typeof item === "string" && item === item.trim() && item !== "").toBe(true);
        }
        if (contract.include !== "touched") expect(contract.paths).toBeUndefined();
        if (contract.description !== undefined) {
          expect(LINE_BREAK.test(contract.description)).toBe(false);
          expect(contract.description.length).toBeLessThanOrEqual(MAX_DESCRIPTION_CHARS);
        }
        expect(contract.unknownKeys.every((unknown) => !KNOWN_KEYS.has(unknown) && Object.hasOwn(raw, unknown))).toBe(true);
        for (const problem of contract.problems) {
          const line = describeProblem(rel, problem);
          expect(UNSAFE.test(line)).toBe(false);
          expect(line.length).toBeLessThan(rel.length * 9 + 600);
        }
        matchesPaths(contract, rel);
        matchesWatch(contract, rel);
      }),
      { numRuns: 3000 },
    );
  });

  test("a comma-separated string is the list it separates (commas inside {} and [] do not separate)", () => {
    const item = fc.constantFrom("*.ts", "src/**", "**/*.{ts,tsx}", "[a,b].md", "{a,b{c,d}}/x", "\\,x", "docs/*.md");
    fc.assert(
      fc.property(fc.array(item, { minLength: 1, maxLength: 8 }), fc.constantFrom(",", ", ", " , "), (items, separator) => {
        expect(read({ globs: items.join(separator) }).paths).toEqual(read({ globs: items }).paths!);
        expect(read({ agents: items.join(separator) }).agents).toEqual(items);
      }),
    );
  });

  test("a description is cut to one line, a prefix of the text's first non-blank line, never inside a surrogate pair", () => {
    const unit = fc.constantFrom("a", " ", "😀", "\n", "\r\n", "\u2028", "\x85", "é", "\t");
    fc.assert(
      fc.property(fc.array(fc.oneof(unit, fc.string({ maxLength: 400 })), { maxLength: 40 }).map((parts) => parts.join("")), (raw) => {
        const contract = read({ description: raw });
        const { description } = contract;
        if (description === undefined) return;
        expect(LINE_BREAK.test(description)).toBe(false);
        expect(description.length).toBeLessThanOrEqual(MAX_DESCRIPTION_CHARS);
        const kept = description.endsWith("…") && contract.problems.length > 0 ? description.slice(0, -1) : description;
        expect(raw.includes(kept)).toBe(true);
        const lastCode = kept.charCodeAt(kept.length - 1);
        if (!/[\ud800-\udbff]/.test(raw.replace(/[\ud800-\udbff][\udc00-\udfff]/g, ""))) expect(lastCode >= 0xd800 && lastCode <= 0xdbff).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });
});
