export interface BackoffOptions {
  /** Delay before the first retry. */
  baseMs: number;
  /** Upper bound for any delay. */
  maxMs: number;
  /** Fraction (0..1) of the delay to randomise in both directions. */
  jitter?: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 100, maxMs: 30_000, jitter: 0 };

/**
 * Delay before retry number `attempt` (1-based): baseMs * 2^(attempt - 1),
 * capped at maxMs, then spread by +/- jitter.
 */
export function backoffDelay(
  attempt: number,
  opts: BackoffOptions = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  if (!Number.isInteger(attempt) || attempt < 1) {
    throw new RangeError(`attempt must be a positive integer, got ${attempt}`);
  }
  const exp = Math.min(opts.maxMs, opts.baseMs * Math.pow(2, attempt - 1));
  const jitter = opts.jitter ?? 0;
  if (jitter <= 0) return exp;
  const spread = exp * Math.min(jitter, 1);
  return Math.max(0, Math.round(exp - spread + random() * 2 * spread));
}
