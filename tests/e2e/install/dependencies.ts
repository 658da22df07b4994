// The installed folders of the package's runtime dependencies, transitively, read from
// package-lock.json (what the lock pins is what the throwaway registry serves).

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./npm.ts";

type LockEntry = { version?: string; dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> };

export function runtimeDependencyFolders(): string[] {
  const lock = JSON.parse(readFileSync(join(REPO_ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, LockEntry> };
  const packages = lock.packages;
  // Node's lookup: the closest node_modules above the dependent that holds the name.
  const locate = (from: string, name: string): string | undefined => {
    for (let base = from; ; ) {
      const key = `${base === "" ? "" : `${base}/`}node_modules/${name}`;
      if (packages[key] !== undefined) return key;
      if (base === "") return undefined;
      const cut = base.lastIndexOf("/node_modules/");
      base = cut < 0 ? "" : base.slice(0, cut);
    }
  };
  const found = new Set<string>();
  const visit = (from: string, dependencies: Record<string, string> = {}) => {
    for (const name of Object.keys(dependencies)) {
      const key = locate(from, name);
      if (key === undefined) throw new Error(`package-lock.json has no ${name} for ${from || "the package"}`);
      if (found.has(key)) continue;
      found.add(key);
      const entry = packages[key]!;
      visit(key, { ...entry.dependencies, ...entry.optionalDependencies });
    }
  };
  visit("", packages[""]?.dependencies);
  return [...found].map((key) => join(REPO_ROOT, key));
}
