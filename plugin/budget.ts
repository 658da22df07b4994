/**
 * Fair-share caps for `sizes` within `available`: sizes at or under the share keep everything,
 * the longest are cut to one common cap (water-filling). Returns a cap per size, in input order.
 */
export function allocate(sizes: readonly number[], available: number): number[] {
  const order = sizes.map((size, index) => ({ size, index })).sort((a, b) => a.size - b.size);
  const caps = new Array<number>(sizes.length);
  let remaining = Math.max(0, available);
  for (let i = 0; i < order.length; i++) {
    const { size, index } = order[i]!;
    const share = Math.floor(remaining / (order.length - i));
    const cap = Math.min(size, share);
    caps[index] = cap;
    remaining -= cap;
  }
  return caps;
}
