import { extname } from "node:path";

/** The context file names of `fileNames`: `AGENTS.md` → base `AGENTS.md`, override `AGENTS.override.md`, local `AGENTS.local.md`. */
export function contextNamesOf(fileNames: readonly string[]): { base: string[]; override: string[]; local: string[]; replaces: ReadonlyMap<string, string> } {
  const stems = fileNames.map((name) => name.slice(0, name.length - extname(name).length));
  const replaces = new Map<string, string>();
  stems.forEach((stem, i) => replaces.has(`${stem}.override.md`) || replaces.set(`${stem}.override.md`, fileNames[i]!));
  return {
    base: [...new Set(fileNames)],
    override: [...replaces.keys()],
    local: [...new Set(stems.map((stem) => `${stem}.local.md`))],
    /** An override's name → the base name whose place it takes (the first configured with that stem). */
    replaces,
  };
}
