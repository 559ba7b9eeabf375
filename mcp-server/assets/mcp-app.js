/*
 * The MCP Apps widget client (ext-apps protocol 2026-01-26): JSON-RPC 2.0 over postMessage
 * between a widget in the host's sandboxed iframe and the host. No imports, no network.
 * Shipped by mcp-server (mcp_server::widget); inline it ahead of the app's own script, since a
 * <script src> would resolve against the host's origin, not the server's.
 *
 *   var app = window.mcpApp;
 *   app.onToolResult(function (result) { ... });          // register before connect()
 *   app.connect({ appInfo: { name: "demo", version: "1.0.0" } }).then(function (init) {
 *     // init.protocolVersion, init.hostCapabilities, init.hostInfo, init.hostContext
 *     return app.callTool({ name: "add", arguments: { a: "1", b: "2" } });
 *   });
 *
 * connect() takes either of two forms:
 *   connect({ appCapabilities, appInfo, timeoutMs, autoResize })   the options form
 *   connect(appCapabilities, timeoutMs?, appInfo?)                 the positional form
 * The rule: a first argument with any of the four option keys is an options object, and then it
 * may hold nothing else and no further argument may follow; any other object (including
 * `{ availableDisplayModes: ["inline"] }`) is appCapabilities, as are undefined and null (no
 * capabilities). The two key sets cannot collide: appCapabilities holds only experimental, tools
 * and availableDisplayModes. Anything else is refused, before anything is posted, with E_ARGS:
 * option keys beside other keys or beside a second argument, a first argument that is not a
 * plain object, a timeout that is not a positive number, an appInfo that is not an object, an
 * autoResize that is not a boolean, more than three arguments.
 *
 * Every request returns a Promise. It rejects with an McpAppError: `code` is the host's JSON-RPC
 * error code (a number, with `data`), or one of the client's own: E_TIMEOUT (no answer in time,
 * 30 s unless given), E_SATURATED (64 requests already in flight: refused before posting),
 * E_SEND (postMessage threw: params not structured-cloneable), E_TEARDOWN (the host tore the
 * widget down, or the page was hidden: nothing in flight will be answered) and E_ARGS (connect()
 * was called with arguments it cannot read, see above).
 */
(function () {
  "use strict";
  if (window.mcpApp) return; // inlined twice: keep the first, it may hold pending requests

  var PROTOCOL_VERSION = "2026-01-26";
  // Both defaults are documented above and in mcp_server::widget.
  var DEFAULT_TIMEOUT_MS = 30000;
  var MAX_IN_FLIGHT = 64;

  function McpAppError(code, message, data) {
    var e = new Error(message);
    Object.setPrototypeOf(e, McpAppError.prototype);
    e.name = "McpAppError";
    e.code = code;
    if (data !== undefined) e.data = data;
    return e;
  }
  McpAppError.prototype = Object.create(Error.prototype, {
    constructor: { value: McpAppError, writable: true, configurable: true },
  });

  var host = window.parent;
  var nextId = 1;
  var pending = new Map(); // id -> { resolve, reject, timer }
  var handlers = new Map(); // notification method -> [handler]
  var teardownHandler = null;
  var tornDown = false;
  var connecting = null; // the connect() promise in flight or settled with success
  var init = null; // the ui/initialize result
  var context = {}; // the host context, partial updates merged in
  var stopResize = null;

  function post(message) {
    host.postMessage(message, "*"); // the sandboxed host frame's origin is not ours to know
  }

  function settle(id, error, result) {
    var p = pending.get(id);
    if (!p) return; // late or unknown: its promise already rejected (timeout, teardown)
    pending.delete(id);
    clearTimeout(p.timer);
    if (error) p.reject(error);
    else p.resolve(result);
  }

  function failAll(code, message) {
    Array.from(pending.keys()).forEach(function (id) {
      settle(id, McpAppError(code, message));
    });
  }

  function request(method, params, timeoutMs) {
    if (tornDown) return Promise.reject(McpAppError("E_TEARDOWN", "the widget was torn down"));
    if (pending.size >= MAX_IN_FLIGHT) {
      return Promise.reject(McpAppError("E_SATURATED", MAX_IN_FLIGHT + " requests already in flight"));
    }
    var id = nextId++;
    var message = { jsonrpc: "2.0", id: id, method: method };
    if (params !== undefined) message.params = params;
    var ms = typeof timeoutMs === "number" && timeoutMs > 0 ? timeoutMs : DEFAULT_TIMEOUT_MS;
    return new Promise(function (resolve, reject) {
      try {
        post(message);
      } catch (e) {
        reject(McpAppError("E_SEND", "postMessage failed: " + (e && e.message), e));
        return;
      }
      var timer = setTimeout(function () {
        settle(id, McpAppError("E_TIMEOUT", method + ": no answer within " + ms + " ms"));
        // As the official SDK does: tell the host, which may then cancel the server's call.
        try {
          notify("notifications/cancelled", { requestId: id, reason: "timeout" });
        } catch (_) {}
      }, ms);
      pending.set(id, { resolve: resolve, reject: reject, timer: timer });
    });
  }

  function notify(method, params) {
    var message = { jsonrpc: "2.0", method: method };
    if (params !== undefined) message.params = params;
    try {
      post(message);
    } catch (e) {
      throw McpAppError("E_SEND", "postMessage failed: " + (e && e.message), e);
    }
  }

  function on(method, handler) {
    var list = handlers.get(method) || [];
    list.push(handler);
    handlers.set(method, list);
    return function off() {
      var i = list.indexOf(handler);
      if (i >= 0) list.splice(i, 1);
    };
  }

  function dispatch(method, params) {
    (handlers.get(method) || []).slice().forEach(function (h) {
      try {
        h(params);
      } catch (e) {
        console.error("mcpApp: a handler of " + method + " threw", e);
      }
    });
  }

  // ---- host theme ----------------------------------------------------------------------------

  function applyContext(ctx) {
    var root = document.documentElement;
    if (ctx.theme === "light" || ctx.theme === "dark") {
      root.setAttribute("data-theme", ctx.theme);
      root.style.colorScheme = ctx.theme; // resolves the host's light-dark() values
    }
    var styles = ctx.styles;
    if (styles && typeof styles === "object") {
      var vars = styles.variables;
      if (vars && typeof vars === "object") {
        Object.keys(vars).forEach(function (k) {
          if (k.indexOf("--") === 0 && typeof vars[k] === "string") root.style.setProperty(k, vars[k]);
        });
      }
      var fonts = styles.css && styles.css.fonts;
      if (typeof fonts === "string") {
        // One element, replaced on each update: repeated updates never stack rules.
        var el = document.getElementById("__mcp-host-fonts");
        if (!el) {
          el = document.createElement("style");
          el.id = "__mcp-host-fonts";
          (document.head || root).appendChild(el);
        }
        el.textContent = fonts;
      }
    }
  }

  function mergeContext(update) {
    if (!update || typeof update !== "object") return;
    Object.keys(update).forEach(function (k) {
      context[k] = update[k];
    });
    applyContext(update);
  }

  function copy(v) {
    return v === undefined ? undefined : JSON.parse(JSON.stringify(v));
  }

  // ---- size -------------------------------------------------------------------------------------

  function autoResize() {
    if (stopResize) return stopResize;
    var queued = false;
    var lastW = 0;
    var lastH = 0;
    function measure() {
      if (queued) return;
      queued = true;
      requestAnimationFrame(function () {
        queued = false;
        var root = document.documentElement;
        // The content's own height, not the iframe's: the host sizes the frame from it.
        var saved = root.style.height;
        root.style.height = "max-content";
        var h = Math.ceil(root.getBoundingClientRect().height);
        root.style.height = saved;
        var w = Math.ceil(window.innerWidth);
        if (w !== lastW || h !== lastH) {
          lastW = w;
          lastH = h;
          try {
            notify("ui/notifications/size-changed", { width: w, height: h });
          } catch (e) {
            console.error("mcpApp: size-changed", e);
          }
        }
      });
    }
    measure();
    var observer = new ResizeObserver(measure);
    observer.observe(document.documentElement);
    if (document.body) observer.observe(document.body);
    stopResize = function () {
      observer.disconnect();
      stopResize = null;
    };
    return stopResize;
  }

  // ---- inbound ----------------------------------------------------------------------------------

  function answer(id, result, error) {
    var message = { jsonrpc: "2.0", id: id };
    if (error) message.error = error;
    else message.result = result;
    try {
      post(message);
    } catch (e) {
      console.error("mcpApp: cannot answer request " + id, e);
    }
  }

  function onHostRequest(msg) {
    if (msg.method === "ping") {
      answer(msg.id, {});
    } else if (msg.method === "ui/resource-teardown") {
      // Answer only once the app's handler settled (it may save state), then fail what is in
      // flight: the host removing the widget will never answer it.
      Promise.resolve()
        .then(function () {
          return teardownHandler ? teardownHandler(msg.params || {}) : undefined;
        })
        .then(
          function () {
            answer(msg.id, {});
          },
          function (e) {
            answer(msg.id, null, { code: -32603, message: "teardown failed: " + ((e && e.message) || e) });
          },
        )
        .then(function () {
          tornDown = true;
          if (stopResize) stopResize();
          failAll("E_TEARDOWN", "the widget was torn down");
        });
    } else {
      answer(msg.id, null, { code: -32601, message: "Method not found: " + msg.method });
    }
  }

  window.addEventListener("message", function (event) {
    // The source, not the origin: a sandboxed widget's own origin is opaque ("null"), and only
    // the frame that embeds it is the host.
    if (event.source !== host) return;
    var msg = event.data;
    if (!msg || typeof msg !== "object" || msg.jsonrpc !== "2.0") return;
    var hasId = typeof msg.id === "number" || typeof msg.id === "string";
    if (typeof msg.method === "string") {
      if (hasId) onHostRequest(msg);
      else if (msg.method === "ui/notifications/host-context-changed") {
        mergeContext(msg.params); // before the app's handlers, so they see the applied theme
        dispatch(msg.method, msg.params);
      } else dispatch(msg.method, msg.params);
    } else if (hasId) {
      if (msg.error && typeof msg.error === "object") {
        var err = msg.error;
        settle(msg.id, McpAppError(err.code, String(err.message), err.data));
      } else if ("result" in msg) settle(msg.id, undefined, msg.result);
    }
  });

  // A hidden page is going away (or frozen in the back-forward cache): no answer will come.
  window.addEventListener("pagehide", function () {
    failAll("E_TEARDOWN", "the page was hidden");
  });

  // ---- the handshake ----------------------------------------------------------------------------

  // The keys of connect()'s options form; appCapabilities' own keys (ext-apps 2026-01-26
  // McpUiAppCapabilities: experimental, tools, availableDisplayModes) are none of these.
  var OPTION_KEYS = ["appCapabilities", "appInfo", "timeoutMs", "autoResize"];

  function isPlainObject(v) {
    return v !== null && typeof v === "object" && Object.prototype.toString.call(v) === "[object Object]";
  }

  function argsError(message) {
    return McpAppError("E_ARGS", "connect(): " + message);
  }

  // connect()'s arguments as one options object, or throws E_ARGS. The rule is in the header.
  function connectOptions(args) {
    if (args.length > 3) throw argsError("takes at most 3 arguments, got " + args.length);
    var first = args[0];
    var more = args[1] !== undefined || args[2] !== undefined;
    if (first !== undefined && first !== null && !isPlainObject(first)) {
      throw argsError("the first argument must be appCapabilities or an options object, not " + describe(first));
    }
    var keys = first ? Object.keys(first) : [];
    var options = keys.filter(function (k) {
      return OPTION_KEYS.indexOf(k) >= 0;
    });
    var opts;
    if (options.length) {
      var others = keys.filter(function (k) {
        return OPTION_KEYS.indexOf(k) < 0;
      });
      if (others.length) {
        throw argsError(
          "an object with " + options.join(", ") + " is the options form and cannot also hold " +
            others.join(", ") + ": put capabilities under appCapabilities",
        );
      }
      if (more) {
        throw argsError(
          "the options form takes no further arguments: pass timeoutMs and appInfo inside it, " +
            "or pass appCapabilities itself first",
        );
      }
      opts = first;
    } else {
      opts = { appCapabilities: first, timeoutMs: args[1], appInfo: args[2] };
    }
    if (opts.appCapabilities !== undefined && opts.appCapabilities !== null && !isPlainObject(opts.appCapabilities)) {
      throw argsError("appCapabilities must be an object, not " + describe(opts.appCapabilities));
    }
    var ms = opts.timeoutMs;
    if (ms !== undefined && !(typeof ms === "number" && isFinite(ms) && ms > 0)) {
      throw argsError("timeoutMs must be a positive number of milliseconds, not " + describe(ms));
    }
    if (opts.appInfo !== undefined && opts.appInfo !== null && !isPlainObject(opts.appInfo)) {
      throw argsError("appInfo must be an object {name, version}, not " + describe(opts.appInfo));
    }
    if (opts.autoResize !== undefined && typeof opts.autoResize !== "boolean") {
      throw argsError("autoResize must be a boolean, not " + describe(opts.autoResize));
    }
    return opts;
  }

  function describe(v) {
    if (Array.isArray(v)) return "an array";
    if (typeof v === "string") return JSON.stringify(v.length > 40 ? v.slice(0, 40) + "..." : v);
    if (typeof v === "number" || typeof v === "boolean") return String(v);
    return v === null ? "null" : typeof v;
  }

  function connect() {
    var options;
    try {
      options = connectOptions(arguments);
    } catch (e) {
      // Refused even once connected: a call that cannot be read is a bug either way.
      return Promise.reject(e);
    }
    if (connecting) return connecting;
    var appInfo = options.appInfo || {};
    var params = {
      appInfo: {
        name: typeof appInfo.name === "string" && appInfo.name ? appInfo.name : "mcp-app",
        version: typeof appInfo.version === "string" && appInfo.version ? appInfo.version : "0.0.0",
      },
      appCapabilities: options.appCapabilities || {},
      protocolVersion: PROTOCOL_VERSION,
    };
    connecting = request("ui/initialize", params, options.timeoutMs).then(
      function (result) {
        init = result || {};
        context = {};
        mergeContext(init.hostContext);
        notify("ui/notifications/initialized");
        if (options.autoResize !== false) autoResize();
        return init;
      },
      function (e) {
        connecting = null; // a failed handshake may be tried again
        throw e;
      },
    );
    return connecting;
  }

  window.mcpApp = {
    /** The ext-apps protocol version this client speaks. */
    protocolVersion: PROTOCOL_VERSION,
    McpAppError: McpAppError,
    connect: connect,
    /** The merged host context (a copy), or {} before connect() resolved. */
    hostContext: function () {
      return copy(context);
    },
    hostCapabilities: function () {
      return init ? copy(init.hostCapabilities) : undefined;
    },
    hostInfo: function () {
      return init ? copy(init.hostInfo) : undefined;
    },

    request: request,
    callTool: function (params, timeoutMs) {
      return request("tools/call", params, timeoutMs);
    },
    readResource: function (params, timeoutMs) {
      return request("resources/read", params, timeoutMs);
    },
    openLink: function (params, timeoutMs) {
      return request("ui/open-link", params, timeoutMs);
    },
    message: function (params, timeoutMs) {
      return request("ui/message", params, timeoutMs);
    },
    requestDisplayMode: function (params, timeoutMs) {
      return request("ui/request-display-mode", params, timeoutMs);
    },
    updateModelContext: function (params, timeoutMs) {
      return request("ui/update-model-context", params, timeoutMs);
    },
    downloadFile: function (params, timeoutMs) {
      return request("ui/download-file", params, timeoutMs);
    },

    notify: notify,
    sizeChanged: function (params) {
      notify("ui/notifications/size-changed", params);
    },
    /** Starts reporting the content's size on every change (connect() does unless told not to). */
    autoResize: autoResize,
    log: function (params) {
      notify("notifications/message", params);
    },
    requestTeardown: function () {
      notify("ui/notifications/request-teardown", {});
    },

    on: on,
    onToolInput: function (h) {
      return on("ui/notifications/tool-input", h);
    },
    onToolInputPartial: function (h) {
      return on("ui/notifications/tool-input-partial", h);
    },
    onToolResult: function (h) {
      return on("ui/notifications/tool-result", h);
    },
    onToolCancelled: function (h) {
      return on("ui/notifications/tool-cancelled", h);
    },
    onHostContextChanged: function (h) {
      return on("ui/notifications/host-context-changed", h);
    },
    /** The host's log messages (`notifications/message`: level, logger, data); log() sends ours. */
    onMessage: function (h) {
      return on("notifications/message", h);
    },
    /** The one host request: the handler may return a promise; the answer waits for it. */
    onResourceTeardown: function (h) {
      teardownHandler = typeof h === "function" ? h : null;
    },
  };
})();
