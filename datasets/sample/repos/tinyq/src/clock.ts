/** Source of time. All durations and timestamps are in milliseconds. */
export interface Clock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

interface Sleeper {
  wakeAt: number;
  resolve: () => void;
}

/** A clock that only moves when a test calls `advance`. */
export class ManualClock implements Clock {
  private current: number;
  private sleepers: Sleeper[] = [];

  constructor(start = 0) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.sleepers.push({ wakeAt: this.current + Math.max(0, ms), resolve });
    });
  }

  /** Move time forward and wake every sleeper whose deadline has passed. */
  advance(ms: number): void {
    this.current += ms;
    const due = this.sleepers.filter((s) => s.wakeAt <= this.current);
    this.sleepers = this.sleepers.filter((s) => s.wakeAt > this.current);
    for (const sleeper of due) sleeper.resolve();
  }
}
