/**
 * Sorted arrays of paths (code-unit order, as `Array.prototype.sort` leaves strings): what lies under
 * a directory is one run of them, found by a binary search, where a map of every directory to what
 * is under it would cost a table and a collection per directory.
 */

/** The first index of `sorted` whose string is not before `value`. */
export function lowerBound(sorted: readonly string[], value: string): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (sorted[middle]! < value) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** Where the strings of `sorted` that start with `prefix` are: one run, `from` (its lower bound) up to `to`. */
export function prefixRun(sorted: readonly string[], prefix: string): { readonly from: number; readonly to: number } {
  const from = lowerBound(sorted, prefix);
  let to = from;
  while (to < sorted.length && sorted[to]!.startsWith(prefix)) to++;
  return { from, to };
}
