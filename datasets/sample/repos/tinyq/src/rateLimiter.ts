import { systemClock, type Clock } from "./clock.ts";

/**
 * Token bucket: holds up to `capacity` tokens and refills continuously at
 * `refillPerSecond` tokens per second. Starts full.
 */
export class TokenBucket {
  readonly capacity: number;
  readonly refillPerSecond: number;
  private readonly clock: Clock;
  private tokens: number;
  private lastRefill: number;

  constructor(capacity: number, refillPerSecond: number, clock: Clock = systemClock) {
    if (!(capacity > 0)) throw new RangeError("capacity must be positive");
    if (!(refillPerSecond > 0)) throw new RangeError("refillPerSecond must be positive");
    this.capacity = capacity;
    this.refillPerSecond = refillPerSecond;
    this.clock = clock;
    this.tokens = capacity;
    this.lastRefill = clock.now();
  }

  private refill(): void {
    const now = this.clock.now();
    const elapsedMs = now - this.lastRefill;
    if (elapsedMs <= 0) return;
    this.tokens = Math.min(this.capacity, this.tokens + (elapsedMs / 1000) * this.refillPerSecond);
    this.lastRefill = now;
  }

  /** Take `n` tokens if they are available right now. */
  tryAcquire(n = 1): boolean {
    this.refill();
    if (this.tokens >= n) {
      this.tokens -= n;
      return true;
    }
    return false;
  }

  /** Milliseconds until `n` tokens will be available (0 if they already are). */
  msUntilAvailable(n = 1): number {
    this.refill();
    if (this.tokens >= n) return 0;
    return Math.ceil(((n - this.tokens) / this.refillPerSecond) * 1000);
  }

  available(): number {
    this.refill();
    return Math.floor(this.tokens);
  }
}
