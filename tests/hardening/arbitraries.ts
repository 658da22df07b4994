import fc from "fast-check";

/** Huge values, built once: the plugin must bound its work on them, not choke. */
const HUGE = {
  string: "a".repeat(2_000_000),
  path: "src/".repeat(300_000) + "index.ts",
  dots: "../".repeat(100_000) + "etc/passwd",
  array: Array.from({ length: 100_000 }, (_, i) => `src/f${i}.ts`),
  patch: `*** Begin Patch\n${"*** Update File: ../outside/AGENTS.md\n".repeat(30_000)}*** End Patch`,
};

/** Path segments that reach hostile places of the sandbox (see util.ts), or are simply odd. */
const SEGMENTS = [
  "..", ".", "", "src", "deep", "er", "file.ts", "index.ts", "docs", "AGENTS.md", "CLAUDE.md",
  "linked-dir", "linked-file", "linked-rel", "linked-nested", "agents-dir-link", "escape", "outside", "nested",
  "loops", "self", "here", "up", "repo", "devices", "~", "nope", "x\0y", "C:", "%2e%2e", "..\\..", " ", "\n", "ü", "😀",
];

/** Strings shaped like paths, from plain to hostile. */
export const pathish = (repo: string, parent: string): fc.Arbitrary<string> =>
  fc.oneof(
    fc.constantFrom(
      "", ".", "..", "../..", "/", "~", "~/", "~/.config/opencode/AGENTS.md", "~root/x",
      "/etc/passwd", "/proc/self/environ", "/dev/zero", "/dev/stdin",
      "C:\\Windows\\System32\\drivers\\etc\\hosts", "C:/Users/x/AGENTS.md", "c:relative", "\\\\server\\share\\AGENTS.md",
      "file:///etc/passwd", "http://example.com/AGENTS.md", "https://x.y/../../", "git+ssh://h/r", "data:text/plain,hi",
      "src\0/../../outside", "\0", "src/index.ts\0.txt",
      `${parent}/AGENTS.md`, `${parent}/outside/AGENTS.md`, `${parent}/outside/nested/code.ts`, `${parent}`, `${parent}/repo-evil`,
      `${repo}/../outside/nested/code.ts`, `${repo}/linked-dir/nested/code.ts`, `${repo}/escape/outside/CLAUDE.md`,
      `${repo}/src/deep/er/file.ts`, `${repo}`, `${repo}/`, `${repo}//src///deep/`, `${repo}/nope/nope/nope.ts`,
      HUGE.string, HUGE.path, HUGE.dots,
    ),
    fc
      .tuple(fc.constantFrom("", "/", "./", `${repo}/`, `${parent}/`, "../", "~/"), fc.array(fc.constantFrom(...SEGMENTS), { maxLength: 12 }))
      .map(([lead, parts]) => lead + parts.join("/")),
    fc.constantFrom("..", "../").chain((dots) => fc.nat({ max: 64 }).map((n) => dots.repeat(n) + "outside/AGENTS.md")),
    fc.string({ maxLength: 40 }),
    fc.string({ unit: "binary", maxLength: 40 }),
  );

/** Anything at all, JSON-safe when `json` (what a child process gets through its script). */
const junk = (json: boolean): fc.Arbitrary<unknown> =>
  json
    ? fc.jsonValue({ maxDepth: 3 })
    : fc.anything({
        maxDepth: 3,
        withBigInt: true,
        withBoxedValues: true,
        withDate: true,
        withMap: true,
        withSet: true,
        withTypedArray: true,
        withNullPrototype: true,
        withObjectString: true,
        withUnicodeString: true,
      });

const patchOf = (paths: fc.Arbitrary<string>) =>
  fc
    .array(fc.tuple(fc.constantFrom("*** Update File: ", "*** Add File: ", "*** Delete File: ", "*** Move to: ", "*** Nonsense: ", "*** Update File:"), paths), { maxLength: 6 })
    .map((lines) => `*** Begin Patch\n${lines.map(([head, path]) => `${head}${path}\n+x`).join("\n")}\n*** End Patch`);

/** Tool arguments of any shape: the keys the plugin reads, filled with hostile values, or junk. */
export const toolArgs = (repo: string, parent: string, { json = false } = {}): fc.Arbitrary<unknown> => {
  const path = pathish(repo, parent);
  const value = fc.oneof(
    { weight: 4, arbitrary: path },
    { weight: 1, arbitrary: fc.array(path, { maxLength: 5 }) },
    { weight: 1, arbitrary: junk(json) },
    { weight: 1, arbitrary: fc.constantFrom<unknown>(null, 0, -1, Number.NaN, true, [], {}, [[`${repo}/src`]], { path: "src" }) },
    ...(json ? [] : [{ weight: 1, arbitrary: fc.constantFrom<unknown>(undefined, HUGE.array, Symbol("s"), () => "src", new String("src")) }]),
  );
  const known = fc.record(
    {
      filePath: value,
      file: value,
      files: value,
      path: value,
      paths: value,
      workdir: value,
      cwd: value,
      directory: value,
      patchText: fc.oneof(patchOf(path), value, ...(json ? [] : [fc.constant(HUGE.patch)])),
      command: fc.oneof(fc.constantFrom("cat ../AGENTS.md", "cd .. && ls"), fc.string()),
      pattern: fc.string({ maxLength: 10 }),
    },
    { requiredKeys: [] },
  );
  return fc.oneof({ weight: 5, arbitrary: known }, { weight: 1, arbitrary: junk(json) });
};

export const toolName = (json = false): fc.Arbitrary<unknown> =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom("read", "edit", "write", "bash", "glob", "grep", "list", "apply_patch", "patch", "task", "webfetch", "todowrite") },
    { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
    { weight: 1, arbitrary: json ? fc.jsonValue({ maxDepth: 1 }) : fc.anything({ maxDepth: 1 }) },
  );

/** What a tool may have printed: sometimes with OpenCode-style reminders naming any path. */
export const toolOutput = (repo: string, parent: string): fc.Arbitrary<string> =>
  fc.oneof(
    fc.string({ maxLength: 30 }),
    fc
      .array(pathish(repo, parent), { minLength: 1, maxLength: 3 })
      .map((paths) => `out\n<system-reminder>\n${paths.map((p) => `Instructions from: ${p}\nrules`).join("\n")}\n</system-reminder>`),
  );

export const sessionID = (json = false): fc.Arbitrary<unknown> =>
  fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom("ses_a", "ses_b", "ses_c") },
    { weight: 1, arbitrary: fc.constantFrom("__proto__", "constructor", "", "hasOwnProperty") },
    { weight: 1, arbitrary: json ? fc.jsonValue({ maxDepth: 1 }) : fc.anything({ maxDepth: 1 }) },
  );

export interface Call {
  session: unknown;
  tool: unknown;
  args: unknown;
  output: string;
}

export const call = (repo: string, parent: string, json = false): fc.Arbitrary<Call> =>
  fc.record({ session: sessionID(json), tool: toolName(json), args: toolArgs(repo, parent, { json }), output: toolOutput(repo, parent) });
