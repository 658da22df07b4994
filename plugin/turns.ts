/**
 * Resolves in a later task of the event loop, once what is queued now has run: the one way the
 * plugin's background work (preloads, the catalog, the index's fill, a block's preparation) gives
 * the loop back. A timer, as the start-up measurements were made with (the store's read slices keep
 * immediates of their own, see store.ts).
 */
export function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => setTimeout(resolve, 0));
}

/**
 * `each` of `items` (until one returns false), in slices of at most `sliceMs`, each in a task of its
 * own: thousands of files (a monorepo's .gitignore files, a block of 2,000 context files) must not
 * hold the loop in one.
 */
export async function inSlices<T>(items: Iterable<T>, sliceMs: number, each: (item: T) => boolean | void): Promise<void> {
  let sliceEnd = performance.now() + sliceMs;
  for (const item of items) {
    if (performance.now() > sliceEnd) {
      await nextTurn();
      sliceEnd = performance.now() + sliceMs;
    }
    if (each(item) === false) return;
  }
}
