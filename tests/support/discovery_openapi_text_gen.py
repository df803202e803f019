#!/usr/bin/env python3
# Generates discovery_openapi_text.cpp (next to this script) from the captured CRD OpenAPI
# document: the resource-independent parts (meta.k8s.io schemas, standard parameter texts).
# Run it from anywhere; the output is clang-format clean (the texts are raw strings).
import json
import os

here = os.path.dirname(os.path.abspath(__file__))
src = os.path.join(here, '..', 'kube', 'fixtures', 'kube-1.26', 'discovery',
                   'openapi-v3-apis-tessel.dev-v1alpha1.json')
d = json.load(open(src))
meta = {k: v for k, v in d['components']['schemas'].items() if k.startswith('io.k8s.')}
params = {}
for p, v in d['paths'].items():
    for op, o in v.items():
        for x in (o if op == 'parameters' else o.get('parameters', [])):
            if x['name'] != 'name':
                params[x['name']] = x
tj = d['components']['schemas']['dev.tessel.v1alpha1.TrainingJob']['properties']
tjl = d['components']['schemas']['dev.tessel.v1alpha1.TrainingJobList']['properties']
fields = {'apiVersion': tj['apiVersion']['description'], 'kind': tj['kind']['description'],
          'objectMetadata': tj['metadata']['description'], 'listMetadata': tjl['metadata']['description']}

def literal(name, value):
    text = json.dumps(value, indent=1, sort_keys=True)
    assert ')json"' not in text
    return f'const char* const {name} = R"json({text})json";\n'

out = ['// Generated from fixtures/kube-1.26/discovery/openapi-v3-apis-tessel.dev-v1alpha1.json: the\n',
       '// parts of the OpenAPI document kube-apiserver v1.26 generates for a CustomResourceDefinition\n',
       '// that do not depend on the resource (meta.k8s.io schemas, texts of the standard parameters and\n',
       '// fields).\n',
       '#include "tests/support/discovery_openapi_text.h"\n\n',
       'namespace tessel::testing {\nnamespace {\n\n',
       literal('kMetaSchemas', meta), '\n', literal('kParameters', params), '\n',
       literal('kFieldDescriptions', fields),
       '\n}  // namespace\n\n',
       'const nlohmann::json& openapi_meta_schemas() {\n  static const nlohmann::json parsed = nlohmann::json::parse(kMetaSchemas);\n  return parsed;\n}\n\n',
       'const nlohmann::json& openapi_parameters() {\n  static const nlohmann::json parsed = nlohmann::json::parse(kParameters);\n  return parsed;\n}\n\n',
       'const nlohmann::json& openapi_field_descriptions() {\n  static const nlohmann::json parsed = nlohmann::json::parse(kFieldDescriptions);\n  return parsed;\n}\n\n',
       '}  // namespace tessel::testing\n']
open(os.path.join(here, 'discovery_openapi_text.cpp'), 'w').write(''.join(out))
