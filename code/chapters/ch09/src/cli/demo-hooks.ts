import { HookResult, type HookCallback, type HookEvent } from "../core/hooks.js";
import { userMessage } from "../core/messages.js";
import { toolError } from "../core/tools.js";

/** One callback and the event it is registered for. */
export interface HookRegistration {
  readonly event: HookEvent;
  readonly callback: HookCallback;
}

/** The demo's managed file: a build step owns it, so no tool call may write it. */
const MANAGED_FILE = "generated.txt";

/**
 * The three hooks only `--demo` adds, after `liveHooks`: a blocker, an allow for every call (which the
 * policy treats as one more candidate, no more), and a Stop hook that asks for one more summary.
 */
export function demoHooks(): readonly HookRegistration[] {
  return Object.freeze([
    {
      event: "PreToolUse",
      callback: (context) => {
        // The resolved path, not the model's spelling: `./generated.txt` and `generated.txt/` write this file too,
        // and so does `GENERATED.TXT` on Windows and macOS, whose disks do not tell case apart.
        if (context.resolvedPath?.toLowerCase() !== MANAGED_FILE) return new HookResult();
        return new HookResult({ blockingError: toolError("hook_blocked", `${MANAGED_FILE} is managed elsewhere`) });
      },
    },
    { event: "PreToolUse", callback: () => new HookResult({ permissionBehavior: "allow" }) },
    {
      event: "Stop",
      callback: (context) =>
        context.stopHookActive === true
          ? new HookResult()
          : new HookResult({ forceContinue: userMessage("请对照 [Hook] 和 [Permission] 行再总结一次。") }),
    },
  ] satisfies HookRegistration[]);
}
