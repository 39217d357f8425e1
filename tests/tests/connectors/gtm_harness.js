/* The Tag Manager sandbox, reduced to what the Queue Manager template may use: runs a
 * template's sandboxed code with `require` giving ONLY the permitted APIs, each checking the
 * template's own permissions as Tag Manager does (a URL outside a permission's patterns is
 * refused), and with the browser's globals shadowed so the code cannot reach them.
 * Records what the tag did in window.QMGTM: `log` (logToConsole lines), `outcome`
 * ("success" | "failure"), `injected` and `pixels` (the URLs asked for). */
(function () {
  "use strict";

  var state = { log: [], outcome: null, injected: [], pixels: [], refused: [] };

  // A Tag Manager URL pattern: scheme, host and port must be the pattern's; the path must be
  // the pattern's, or start with it when the pattern ends in "/" or "*". The query is ignored.
  function matches(pattern, url) {
    var split = function (text) {
      var found = /^(https?:\/\/[^\/?#]+)([^?#]*)/i.exec(text);
      return found ? { origin: found[1].toLowerCase(), path: found[2] || "/" } : null;
    };
    var want = split(pattern);
    var have = split(url);
    if (!want || !have || want.origin !== have.origin) {
      return false;
    }
    if (want.path.charAt(want.path.length - 1) === "*") {
      return have.path.indexOf(want.path.slice(0, -1)) === 0;
    }
    if (want.path.charAt(want.path.length - 1) === "/") {
      return have.path.indexOf(want.path) === 0;
    }
    return have.path === want.path;
  }

  function allowed(permissions, kind, url) {
    var patterns = permissions[kind];
    if (!patterns) {
      return false;
    }
    if (patterns === true) {
      return true;
    }
    for (var index = 0; index < patterns.length; index += 1) {
      if (matches(patterns[index], url)) {
        return true;
      }
    }
    return false;
  }

  function apis(permissions) {
    var demand = function (kind, url) {
      if (!allowed(permissions, kind, url)) {
        state.refused.push(kind + " " + url);
        throw new Error("permission " + kind + " refuses " + url);
      }
    };
    return {
      injectScript: function (url, onSuccess, onFailure) {
        demand("inject_script", url);
        state.injected.push(url);
        var script = document.createElement("script");
        script.src = url;
        script.async = true;
        script.onload = function () { if (onSuccess) { onSuccess(); } };
        script.onerror = function () { if (onFailure) { onFailure(); } };
        (document.head || document.documentElement).appendChild(script);
      },
      sendPixel: function (url, onSuccess, onFailure) {
        demand("send_pixel", url);
        state.pixels.push(url);
        var image = new Image();
        image.onload = function () { if (onSuccess) { onSuccess(); } };
        image.onerror = function () { if (onFailure) { onFailure(); } };
        image.src = url;
      },
      logToConsole: function () {
        demand("logging", "");
        var line = Array.prototype.slice.call(arguments).join(" ");
        state.log.push(line);
        window.console.log(line);
      },
      encodeUriComponent: function (text) {
        return encodeURIComponent(String(text));
      },
      getUrl: function (component) {
        demand("get_url", "");
        var here = window.location;
        switch (component) {
          case "protocol": return here.protocol.replace(/:$/, "");
          case "host": return here.hostname;
          case "port": return here.port;
          case "path": return here.pathname;
          case "query": return here.search.replace(/^\?/, "");
          case "fragment": return here.hash.replace(/^#/, "");
          default: return here.href;
        }
      },
      queryPermission: function (kind, url) {
        return allowed(permissions, kind, url || "");
      }
    };
  }

  // Runs `code` as the tag's sandboxed body with `data` (the tag's fields) and `permissions`
  // ({inject_script: [patterns], send_pixel: [patterns], get_url: true, logging: true}).
  function run(code, data, permissions) {
    var permitted = apis(permissions);
    var require = function (name) {
      if (!Object.prototype.hasOwnProperty.call(permitted, name)) {
        throw new Error("not a permitted API: " + name);
      }
      return permitted[name];
    };
    var fields = {};
    for (var key in data) {
      if (Object.prototype.hasOwnProperty.call(data, key)) {
        fields[key] = data[key];
      }
    }
    fields.gtmOnSuccess = function () { state.outcome = state.outcome || "success"; };
    fields.gtmOnFailure = function () { state.outcome = state.outcome || "failure"; };
    var shadowed = ["window", "document", "location", "navigator", "self", "globalThis", "top",
      "parent", "frames", "XMLHttpRequest", "fetch", "Image", "localStorage", "sessionStorage",
      "console", "setTimeout", "eval"];
    var body = new Function(["require", "data"].concat(shadowed).join(","), code);
    try {
      body(require, fields);
    } catch (error) {
      state.log.push("sandbox error: " + error.message);
      state.outcome = state.outcome || "failure";
    }
  }

  state.run = run;
  window.QMGTM = state;
})();
