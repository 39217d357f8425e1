___TERMS_OF_SERVICE___

By creating or modifying this file you agree to Google Tag Manager's Community
Template Gallery Developer Terms of Service available at
https://developers.google.com/tag-manager/gallery-tos (or such other URL as
Google may provide), as modified from time to time.


___INFO___

{
  "type": "TAG",
  "id": "cvt_temp_public_id",
  "version": 1,
  "securityGroups": [],
  "displayName": "Queue Manager waiting room",
  "categories": ["UTILITY"],
  "brand": {
    "id": "brand_dummy",
    "displayName": "Queue Manager"
  },
  "description": "Loads the Queue Manager browser snippet for a room: a visitor without a pass is sent to the room's waiting page, and sent back once let through. Version 1.0.0.",
  "containerContexts": [
    "WEB"
  ]
}


___TEMPLATE_PARAMETERS___

[
  {
    "type": "TEXT",
    "name": "server",
    "displayName": "Queue server URL",
    "simpleValueType": true,
    "valueHint": "https://queue.example.com",
    "help": "The queue server's public base URL, without a trailing path. Set the same origin in this template's permissions (Inject scripts, Sends pixels).",
    "valueValidators": [
      { "type": "NON_EMPTY" },
      { "type": "REGEX", "args": ["^https?://[^/?#]+/?$"] }
    ]
  },
  {
    "type": "TEXT",
    "name": "roomId",
    "displayName": "Room id",
    "simpleValueType": true,
    "help": "The waiting room that protects the pages this tag fires on.",
    "valueValidators": [
      { "type": "NON_EMPTY" },
      { "type": "REGEX", "args": ["^[A-Za-z0-9_-]{1,64}$"] }
    ]
  },
  {
    "type": "SELECT",
    "name": "failMode",
    "displayName": "When the queue server cannot answer",
    "simpleValueType": true,
    "defaultValue": "open",
    "selectItems": [
      { "value": "open", "displayValue": "Show the page (fail open)" },
      { "value": "closed", "displayValue": "Hold the page and try again in 30 s (fail closed)" }
    ]
  },
  {
    "type": "CHECKBOX",
    "name": "checkInstall",
    "checkboxText": "Check the installation (loads verify.gif once per page; the verdict is logged in Preview)",
    "simpleValueType": true,
    "defaultValue": false
  }
]


___SANDBOXED_JS_FOR_WEB_TEMPLATE___

// Queue Manager Tag Manager template 1.0.0: injects the browser snippet for the room, which
// asks the door check and acts on it; optionally runs the server's install check.
const injectScript = require('injectScript');
const sendPixel = require('sendPixel');
const logToConsole = require('logToConsole');
const encodeUriComponent = require('encodeUriComponent');
const getUrl = require('getUrl');
const queryPermission = require('queryPermission');

const VERSION = '1.0.0';

// The server without a trailing slash (the sandbox has no regular expressions).
let server = data.server || '';
while (server.length > 0 && server.charAt(server.length - 1) === '/') {
  server = server.substring(0, server.length - 1);
}
const roomId = data.roomId || '';

// The snippet reads its room (and fail mode) from its own URL: a template cannot set the
// script tag's attributes. Its server is the origin it was loaded from.
let snippetUrl = server + '/snippet/latest.js?room=' + encodeUriComponent(roomId);
if (data.failMode === 'closed') {
  snippetUrl = snippetUrl + '&fail=closed';
}

// The page's origin, as the room's tag origins must list it.
const port = getUrl('port');
const protocol = getUrl('protocol');
const defaultPort = (protocol === 'https' && port === '443') || (protocol === 'http' && port === '80');
const origin = protocol + '://' + getUrl('host') + (port && !defaultPort ? ':' + port : '');

const verifyUrl = server + '/api/verify.gif?roomId=' + encodeUriComponent(roomId) +
  '&origin=' + encodeUriComponent(origin) +
  '&connector=gtm&version=' + encodeUriComponent(VERSION);

const checkInstall = function () {
  if (!queryPermission('send_pixel', verifyUrl)) {
    logToConsole('queue-manager: the install check is not allowed: add ' + server + '/api/verify.gif to the template\'s Sends pixels permission');
    return;
  }
  sendPixel(verifyUrl, function () {
    logToConsole('queue-manager: install check passed for room ' + roomId + ' on ' + origin);
  }, function () {
    logToConsole('queue-manager: install check FAILED for room ' + roomId + ' on ' + origin +
      '; open ' + server + '/api/verify?roomId=' + encodeUriComponent(roomId) +
      '&origin=' + encodeUriComponent(origin) + ' to see which check failed and its fix');
  });
};

if (!server || !roomId) {
  logToConsole('queue-manager: set the queue server URL and the room id');
  data.gtmOnFailure();
} else if (!queryPermission('inject_script', snippetUrl)) {
  logToConsole('queue-manager: injecting ' + server + '/snippet/latest.js is not allowed: set the template\'s Inject scripts permission to the queue server');
  data.gtmOnFailure();
} else {
  injectScript(snippetUrl, function () {
    if (data.checkInstall) {
      checkInstall();
    }
    data.gtmOnSuccess();
  }, function () {
    logToConsole('queue-manager: the snippet did not load from ' + server);
    if (data.checkInstall) {
      checkInstall();
    }
    data.gtmOnFailure();
  }, 'queue-manager-snippet');
}


___WEB_PERMISSIONS___

[
  {
    "instance": {
      "key": {
        "publicId": "inject_script",
        "versionId": "1"
      },
      "param": [
        {
          "key": "urls",
          "value": {
            "type": 2,
            "listItem": [
              {
                "type": 1,
                "string": "https://queue.example.com/snippet/latest.js"
              }
            ]
          }
        }
      ]
    },
    "clientAnnotations": {
      "isEditedByUser": true
    },
    "isRequired": true
  },
  {
    "instance": {
      "key": {
        "publicId": "send_pixel",
        "versionId": "1"
      },
      "param": [
        {
          "key": "allowedUrls",
          "value": {
            "type": 1,
            "string": "specific"
          }
        },
        {
          "key": "urls",
          "value": {
            "type": 2,
            "listItem": [
              {
                "type": 1,
                "string": "https://queue.example.com/api/verify.gif"
              }
            ]
          }
        }
      ]
    },
    "clientAnnotations": {
      "isEditedByUser": true
    },
    "isRequired": true
  },
  {
    "instance": {
      "key": {
        "publicId": "get_url",
        "versionId": "1"
      },
      "param": [
        {
          "key": "urlParts",
          "value": {
            "type": 1,
            "string": "specific"
          }
        },
        {
          "key": "protocol",
          "value": {
            "type": 8,
            "boolean": true
          }
        },
        {
          "key": "host",
          "value": {
            "type": 8,
            "boolean": true
          }
        },
        {
          "key": "port",
          "value": {
            "type": 8,
            "boolean": true
          }
        },
        {
          "key": "path",
          "value": {
            "type": 8,
            "boolean": false
          }
        },
        {
          "key": "extension",
          "value": {
            "type": 8,
            "boolean": false
          }
        },
        {
          "key": "fragment",
          "value": {
            "type": 8,
            "boolean": false
          }
        },
        {
          "key": "query",
          "value": {
            "type": 8,
            "boolean": false
          }
        }
      ]
    },
    "clientAnnotations": {
      "isEditedByUser": true
    },
    "isRequired": true
  },
  {
    "instance": {
      "key": {
        "publicId": "logging",
        "versionId": "1"
      },
      "param": [
        {
          "key": "environments",
          "value": {
            "type": 1,
            "string": "debug"
          }
        }
      ]
    },
    "isRequired": true
  }
]


___TESTS___

scenarios:
- name: injects the snippet for the room
  code: |-
    mock('injectScript', (url, onSuccess, onFailure) => {
      assertThat(url).isEqualTo('https://queue.example.com/snippet/latest.js?room=launch');
      onSuccess();
    });
    runCode({server: 'https://queue.example.com/', roomId: 'launch', failMode: 'open', checkInstall: false});
    assertApi('injectScript').wasCalled();
    assertApi('sendPixel').wasNotCalled();
    assertApi('gtmOnSuccess').wasCalled();
- name: fails closed when told to
  code: |-
    mock('injectScript', (url, onSuccess, onFailure) => {
      assertThat(url).isEqualTo('https://queue.example.com/snippet/latest.js?room=launch&fail=closed');
      onSuccess();
    });
    runCode({server: 'https://queue.example.com', roomId: 'launch', failMode: 'closed', checkInstall: false});
    assertApi('gtmOnSuccess').wasCalled();
- name: runs the install check through verify.gif
  code: |-
    mock('injectScript', (url, onSuccess, onFailure) => { onSuccess(); });
    mock('getUrl', (part) => part === 'protocol' ? 'https' : part === 'host' ? 'shop.example' : '');
    mock('sendPixel', (url, onSuccess, onFailure) => {
      assertThat(url).isEqualTo('https://queue.example.com/api/verify.gif?roomId=launch&origin=https%3A%2F%2Fshop.example&connector=gtm&version=1.0.0');
      onFailure();
    });
    runCode({server: 'https://queue.example.com', roomId: 'launch', failMode: 'open', checkInstall: true});
    assertApi('sendPixel').wasCalled();
    assertApi('logToConsole').wasCalled();
    assertApi('gtmOnSuccess').wasCalled();
- name: a snippet that does not load fails the tag
  code: |-
    mock('injectScript', (url, onSuccess, onFailure) => { onFailure(); });
    runCode({server: 'https://queue.example.com', roomId: 'launch', failMode: 'open', checkInstall: false});
    assertApi('gtmOnFailure').wasCalled();


___NOTES___

Queue Manager Tag Manager template 1.0.0 (connector "gtm").

After importing, set the queue server's origin in the Permissions tab: replace
https://queue.example.com in "Injects scripts" (/snippet/latest.js) and "Sends pixels"
(/api/verify.gif) with the server you enter in the tag, so the template can reach that server
and no other. Add the site's origin to the room's tag origins (tagOrigins) on the server.
