/** The most decoded bytes one reply's body may have: a compressed body inflates here, so it counts as it unpacks. */
export const MAX_REPLY_BYTES = 32 * 1024 * 1024;
/** The longest wait a provider may ask for between attempts (`Retry-After`); past it the SDK's own backoff applies. */
export const MAX_RETRY_AFTER_MS = 10_000;

/** The provider's answer broke a bound: said to the reader as it is, in one line. */
export class ProviderReplyError extends Error {
  override readonly name = "ProviderReplyError";
}

export interface FetchBounds {
  /** One attempt, from the request to the last byte of its body. */
  readonly deadlineMs: number;
  readonly maxBytes?: number;
  readonly maxRetryAfterMs?: number;
}

/**
 * The `fetch` the OpenAI SDK is given. Whatever answers at the base URL is not trusted: a redirect is not
 * followed (it would carry the conversation and the key to another address), a body is cut off past `maxBytes`
 * decoded bytes or once `deadlineMs` has passed since the attempt began (the SDK's own timeout ends when the
 * headers arrive, so a body dripping a byte at a time would wait forever), and a `Retry-After` longer than
 * `maxRetryAfterMs` is dropped, so the SDK waits its own few seconds instead of an hour.
 */
export function boundedFetch(bounds: FetchBounds): typeof fetch {
  const maxBytes = bounds.maxBytes ?? MAX_REPLY_BYTES;
  const maxRetryAfterMs = bounds.maxRetryAfterMs ?? MAX_RETRY_AFTER_MS;
  return async (input, init) => {
    // A timer of our own rather than AbortSignal.timeout: a timeout signal that only AbortSignal.any refers to can
    // be garbage-collected before it fires, and then a dripping body is waited on forever.
    const deadline = new AbortController();
    const timer = setTimeout(
      () => deadline.abort(new DOMException("The attempt's deadline passed", "TimeoutError")),
      bounds.deadlineMs,
    );
    // While an attempt is in flight its socket keeps the process alive; a body no one reads to its end must not.
    timer.unref();
    const signal = init?.signal ? AbortSignal.any([init.signal, deadline.signal]) : deadline.signal;
    let response: Response;
    try {
      response = await fetch(input, { ...init, redirect: "manual", signal });
    } catch (error) {
      clearTimeout(timer);
      throw error;
    }
    if (response.status >= 300 && response.status < 400) {
      clearTimeout(timer);
      await response.body?.cancel();
      throw new ProviderReplyError(
        `The model provider answered with a redirect (HTTP ${response.status}); redirects are not followed, so set OPENAI_BASE_URL to the final address`,
      );
    }
    const headers = new Headers(response.headers);
    if (retryAfterMs(headers) > maxRetryAfterMs) {
      headers.delete("retry-after");
      headers.delete("retry-after-ms");
    }
    let received = 0;
    const counted = response.body?.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          received += chunk.byteLength;
          if (received <= maxBytes) controller.enqueue(chunk);
          else {
            clearTimeout(timer);
            controller.error(
              new ProviderReplyError(
                `The model provider's reply is larger than ${maxBytes / 1024 / 1024} MiB; it was not read further`,
              ),
            );
          }
        },
        flush() {
          clearTimeout(timer);
        },
      }),
    );
    if (counted === undefined) clearTimeout(timer);
    return new Response(counted ?? null, { status: response.status, statusText: response.statusText, headers });
  };
}

/** How long the provider asks to wait, in milliseconds (0 when it does not ask, or asks in a form no one reads). */
function retryAfterMs(headers: Headers): number {
  const milliseconds = Number.parseFloat(headers.get("retry-after-ms") ?? "");
  if (Number.isFinite(milliseconds)) return milliseconds;
  const value = headers.get("retry-after");
  if (value === null) return 0;
  const seconds = Number.parseFloat(value);
  if (Number.isFinite(seconds)) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isFinite(date) ? date - Date.now() : 0;
}
