import { sep } from "node:path";

/** Lexical containment: `path` is `root` or below it. Symlinks are settled on real paths, at read time. */
export function isInside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}
